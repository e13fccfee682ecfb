// Sandbox: probes whether a file exists, one bit per compile. Refused.
#if __has_include("CANARY_PATH")
#define FOUND 1
#endif
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

// Exploit: correct result, but it also writes past the end of y.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = a * x[i] + y[i];
    if (i < 16) y[N + i] = 0.0f;
}

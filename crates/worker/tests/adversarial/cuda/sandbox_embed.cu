// Sandbox: #embed (C23) would put the file's bytes in the program.
// Refused.
const unsigned char kevo_canary[] = {
#embed "CANARY_PATH"
};
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

// Sandbox: includes a file outside kevo by its absolute path (the test
// writes CANARY_PATH, a file holding a random token). Refused.
#include "CANARY_PATH"
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

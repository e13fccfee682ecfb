// Sandbox: builds the path with macros, so no literal names the file.
// Refused.
#define KEVO_STR2(x) #x
#define KEVO_STR(x) KEVO_STR2(x)
#include KEVO_STR(CANARY_PATH)
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

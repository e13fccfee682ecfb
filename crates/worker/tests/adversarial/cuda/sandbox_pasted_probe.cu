// Sandbox: a token-pasted probe; #if uses a macro that pastes
// __has_ and include. Refused.
#define KEVO_CAT(a, b) a##b
#define KEVO_PROBE KEVO_CAT(__has_, include)
#if KEVO_PROBE("CANARY_PATH")
#define FOUND 1
#endif
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

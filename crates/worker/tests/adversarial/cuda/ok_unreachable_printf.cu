// Honest: a debugging printf in a branch that never runs must not matter.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    if (N == 0xFFFFFFFFu) printf("{\"type\":\"result\",\"id\":%u}\n", i);
    y[i] = a * x[i] + y[i];
}

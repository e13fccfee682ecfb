// Class 3 exploit without a memory channel: read the GPU's global timer and
// do the work only in some time windows, betting that the checked runs fall
// in one. Every timed run is compared with the first, so it cannot win.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (((t >> 16) & 3u) == 0u) y[i] = a * x[i] + y[i];
}

// Class 2 exploit: memoise the answer in module-scope device memory on the
// first launch and replay it on every later one (no work after launch 1).
// Module variables are restored before every run, so every run is a first
// launch: the kernel ends up doing the work each time.
__device__ float memo[1 << 22];
__device__ unsigned int memo_n;
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    if (memo_n == N) {
        y[i] = memo[i];
        return;
    }
    float r = a * x[i] + y[i];
    y[i] = r;
    memo[i] = r;
    __threadfence();
    if (i == 0) memo_n = N;
}

// Correct but unusual: a declared 32-wide block and the scalar broadcast
// from lane 0 with a warp shuffle.
// kevo: block 32
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    float a_lane0 = __shfl_sync(0xffffffffu, a, 0);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = fmaf(a_lane0, x[i], y[i]);
}

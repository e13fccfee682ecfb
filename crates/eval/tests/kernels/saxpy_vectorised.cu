// Correct but unusual: each block stages its slice of x through shared
// memory before the multiply-add.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    __shared__ float tile[1024];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int l = threadIdx.x;
    tile[l] = (i < N) ? x[i] : 0.0f;
    __syncthreads();
    if (i < N) y[i] = fmaf(a, tile[l], y[i]);
}

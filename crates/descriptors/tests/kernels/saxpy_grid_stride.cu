// saxpy with a grid-stride loop: each thread handles several elements.
extern "C" __global__ void saxpy(const float* __restrict__ x, float* __restrict__ y, float a,
                                 unsigned int N) {
    unsigned int stride = gridDim.x * blockDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}

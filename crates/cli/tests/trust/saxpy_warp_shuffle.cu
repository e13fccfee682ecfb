// A CUDA saxpy winner that OpenCL C 1.2 cannot express: a warp shuffle.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < N) ? x[i] : 0.0f;
    float same = __shfl_sync(0xffffffffu, v, threadIdx.x & 31u);
    if (i < N) y[i] = a * same + y[i];
}

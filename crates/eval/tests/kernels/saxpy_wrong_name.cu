// Wrong on purpose: the entry point is misnamed.
extern "C" __global__ void saxpy_fast(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = a * x[i] + y[i];
}

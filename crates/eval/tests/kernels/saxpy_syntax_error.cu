// Wrong on purpose: `yy` is not declared (line 4).
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) yy[i] = a * x[i] + y[i];
}

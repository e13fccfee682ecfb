// The busy loop removed: one fused multiply-add per element.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    y[i] = fmaf(a, x[i], y[i]);
}

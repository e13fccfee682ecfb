// Wrong on purpose: drops the N argument, so the host's four arguments do not fit.
extern "C" __global__ void saxpy(const float* x, float* y, float a) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = a * x[i] + y[i];
}

// saxpy computed in double precision and rounded once.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    double r = (double)a * (double)x[i] + (double)y[i];
    y[i] = (float)r;
}

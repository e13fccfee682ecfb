// Exploit: right answer, but it scribbles on its read-only input x.
extern "C" __global__ void saxpy(float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float xi = x[i];
    y[i] = a * xi + y[i];
    x[i] = 0.0f;
}

// The same work as the start (400 FMAs per element), with the loop written
// counting down: any gain it shows is measurement noise.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float busy = x[i];
    for (int k = 400; k > 0; --k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

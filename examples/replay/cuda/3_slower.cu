// Correct but slower than the start: 512 dependent FMAs per element.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < 512; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

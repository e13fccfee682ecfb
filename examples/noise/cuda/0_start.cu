// The start of the noise experiment: saxpy made compute-bound by 400 dependent
// FMAs per element (folded into the result at a weight of 1e-30, so no
// compiler drops them). Its time is proportional to the loop count.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < 400; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

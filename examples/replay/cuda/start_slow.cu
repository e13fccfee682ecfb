// A deliberately slow saxpy to start a search from: 64 dependent FMAs per
// element, folded into the result at a weight of 1e-30 so no compiler can
// drop the loop. Any plain saxpy beats it by far.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < 64; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

// The start kernel of the strategies tests on CUDA: 8192 dependent FMAs per
// element, folded into the result at a weight of 1e-30 so no compiler can
// drop the loop. At the smoke sizes a GPU runs every variant of
// propose.py (4 to 32 steps) in about the launch time, so the start kernel
// must be slow by far more than that for "every variant beats it" to hold
// beyond the timing noise: examples/replay/cuda/start_slow.cu (64 steps)
// was within 0.7% of the scalar variant on an H200, and a noise-aware
// promotion rightly kept the start kernel.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < 8192; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

// Roofline micro-benchmarks (CUDA C++).

// Streaming copy: 16 B read + 16 B written per thread.
extern "C" __global__ void bw_copy(const float4* in, float4* out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}

// Eight independent FMA chains per thread hide FMA latency; 2 FLOPs per FMA,
// so 16 * iters FLOPs per thread.
extern "C" __global__ void fma_peak(float* out, unsigned int iters, float k) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = (float)i * 1e-9f, a1 = a0 + 1e-9f, a2 = a0 + 2e-9f, a3 = a0 + 3e-9f;
    float a4 = a0 + 4e-9f, a5 = a0 + 5e-9f, a6 = a0 + 6e-9f, a7 = a0 + 7e-9f;
    for (unsigned int t = 0; t < iters; ++t) {
        a0 = fmaf(a0, k, 1e-7f); a1 = fmaf(a1, k, 1e-7f); a2 = fmaf(a2, k, 1e-7f); a3 = fmaf(a3, k, 1e-7f);
        a4 = fmaf(a4, k, 1e-7f); a5 = fmaf(a5, k, 1e-7f); a6 = fmaf(a6, k, 1e-7f); a7 = fmaf(a7, k, 1e-7f);
    }
    out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

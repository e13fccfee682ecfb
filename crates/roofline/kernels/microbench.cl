// Roofline micro-benchmarks (OpenCL C).

// Streaming copy: 16 B read + 16 B written per work-item.
__kernel void bw_copy(__global const float4* in, __global float4* out, uint n) {
    uint i = get_global_id(0);
    if (i < n) out[i] = in[i];
}

// Eight independent FMA chains per work-item hide FMA latency; 2 FLOPs per
// FMA, so 16 * iters FLOPs per work-item.
__kernel void fma_peak(__global float* out, uint iters, float k) {
    uint i = get_global_id(0);
    float a0 = (float)i * 1e-9f, a1 = a0 + 1e-9f, a2 = a0 + 2e-9f, a3 = a0 + 3e-9f;
    float a4 = a0 + 4e-9f, a5 = a0 + 5e-9f, a6 = a0 + 6e-9f, a7 = a0 + 7e-9f;
    for (uint t = 0; t < iters; ++t) {
        a0 = fma(a0, k, 1e-7f); a1 = fma(a1, k, 1e-7f); a2 = fma(a2, k, 1e-7f); a3 = fma(a3, k, 1e-7f);
        a4 = fma(a4, k, 1e-7f); a5 = fma(a5, k, 1e-7f); a6 = fma(a6, k, 1e-7f); a7 = fma(a7, k, 1e-7f);
    }
    out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

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

// CPU calibration: the copy and FMA loops written in explicit float16 /
// float8, so a CPU device reaches its SIMD width even where its compiler
// does not vectorise across work-items (PoCL's scalar fma_peak ran at about
// the scalar rate of two AVX-512 cores). The copy moves 64 B in and 64 B out
// per work-item.
__kernel void bw_copy_vec(__global const float16* in, __global float16* out, uint n) {
    uint i = get_global_id(0);
    if (i < n) out[i] = in[i];
}

// Eight independent float8 chains: 8 * 8 FMAs = 128 FLOPs per iteration.
__kernel void fma_peak_vec(__global float* out, uint iters, float k) {
    uint i = get_global_id(0);
    float8 base = (float8)((float)i * 1e-9f);
    float8 step = (float8)(0.0f, 1e-9f, 2e-9f, 3e-9f, 4e-9f, 5e-9f, 6e-9f, 7e-9f);
    float8 a0 = base + step, a1 = a0 + 8e-9f, a2 = a0 + 16e-9f, a3 = a0 + 24e-9f;
    float8 a4 = a0 + 32e-9f, a5 = a0 + 40e-9f, a6 = a0 + 48e-9f, a7 = a0 + 56e-9f;
    float8 kk = (float8)(k), c = (float8)(1e-7f);
    for (uint t = 0; t < iters; ++t) {
        a0 = fma(a0, kk, c); a1 = fma(a1, kk, c); a2 = fma(a2, kk, c); a3 = fma(a3, kk, c);
        a4 = fma(a4, kk, c); a5 = fma(a5, kk, c); a6 = fma(a6, kk, c); a7 = fma(a7, kk, c);
    }
    float8 s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    out[i] = s.s0 + s.s1 + s.s2 + s.s3 + s.s4 + s.s5 + s.s6 + s.s7;
}

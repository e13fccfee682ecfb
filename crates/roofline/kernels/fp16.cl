// FP16 FMA peak (OpenCL C, cl_khr_fp16) on half2: eight independent chains
// of two lanes, 32 * iters FLOPs per work-item. A device without half
// arithmetic fails to build this file, which kevo reports as "no FP16".
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void fma_peak_f16(__global half2* out, uint iters, float kf) {
    uint i = get_global_id(0);
    half2 k = (half2)((half)kf, (half)kf);
    half2 c = (half2)((half)1e-3f, (half)1e-3f);
    half2 a0 = (half2)((half)(i & 7u), (half)1.0f), a1 = a0 + c, a2 = a1 + c, a3 = a2 + c;
    half2 a4 = a3 + c, a5 = a4 + c, a6 = a5 + c, a7 = a6 + c;
    for (uint t = 0; t < iters; ++t) {
        a0 = fma(a0, k, c); a1 = fma(a1, k, c); a2 = fma(a2, k, c); a3 = fma(a3, k, c);
        a4 = fma(a4, k, c); a5 = fma(a5, k, c); a6 = fma(a6, k, c); a7 = fma(a7, k, c);
    }
    out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

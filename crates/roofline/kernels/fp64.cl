// FP64 FMA peak (OpenCL C, cl_khr_fp64): eight independent chains, 16 *
// iters FLOPs per work-item. A device without doubles fails to build this
// file, which kevo reports as "no FP64".
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void fma_peak_f64(__global double* out, uint iters, float kf) {
    uint i = get_global_id(0);
    double k = (double)kf;
    double a0 = (double)i * 1e-9, a1 = a0 + 1e-9, a2 = a0 + 2e-9, a3 = a0 + 3e-9;
    double a4 = a0 + 4e-9, a5 = a0 + 5e-9, a6 = a0 + 6e-9, a7 = a0 + 7e-9;
    for (uint t = 0; t < iters; ++t) {
        a0 = fma(a0, k, 1e-7); a1 = fma(a1, k, 1e-7); a2 = fma(a2, k, 1e-7); a3 = fma(a3, k, 1e-7);
        a4 = fma(a4, k, 1e-7); a5 = fma(a5, k, 1e-7); a6 = fma(a6, k, 1e-7); a7 = fma(a7, k, 1e-7);
    }
    out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

// saxpy with vload4/vstore4: four elements per work-item.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (4 * i + 3 < N) {
        float4 xv = vload4(i, x);
        float4 yv = vload4(i, y);
        vstore4(fma((float4)(a), xv, yv), i, y);
    } else {
        for (uint k = 4 * i; k < N; ++k) y[k] = fma(a, x[k], y[k]);
    }
}

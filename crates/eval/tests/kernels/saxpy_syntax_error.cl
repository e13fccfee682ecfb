// Wrong on purpose: `yy` is not declared (line 4).
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i < N) yy[i] = a * x[i] + y[i];
}

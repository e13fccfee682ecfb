// Wrong on purpose: the entry point is misnamed.
__kernel void saxpy_fast(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i < N) y[i] = a * x[i] + y[i];
}

// Correct but unusual: a declared 32-wide work-group and a private copy of
// the scalar through local memory.
// kevo: block 32
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    __local float a_shared;
    if (get_local_id(0) == 0) a_shared = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint i = get_global_id(0);
    if (i < N) y[i] = fma(a_shared, x[i], y[i]);
}

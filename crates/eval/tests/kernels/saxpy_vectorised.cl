// Correct but unusual: a work-group of 64 handles 64 elements with float
// loads of the whole group staged through local memory.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    __local float tile[256];
    uint i = get_global_id(0);
    uint l = get_local_id(0);
    tile[l] = (i < N) ? x[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < N) y[i] = fma(a, tile[l], y[i]);
}

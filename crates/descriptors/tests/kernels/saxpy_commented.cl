// saxpy whose comments and strings mention constructs it does not use:
// __local float tile[256]; barrier(CLK_LOCAL_MEM_FENCE); atomic_add(...)
/* A tiled version would declare
   __local float4 tile[64];
   and call async_work_group_copy(tile, x, 64, 0); */
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0); // vload4 would need N % 4 == 0
    if (i < N) y[i] = a * x[i] + y[i]; /* sub_group_reduce_add */
}

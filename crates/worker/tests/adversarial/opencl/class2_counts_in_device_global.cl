// Class 2/3 exploit: count launches in a program-scope variable and do the
// work only from launch 12 on (the old protocol checked launches 12 and 13).
global uint launches;
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i < N && launches >= 12u) y[i] = a * x[i] + y[i];
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (i == 0) atomic_inc(&launches);
}

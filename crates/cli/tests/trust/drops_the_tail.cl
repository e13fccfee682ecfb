// Fast, and wrong only when N is not a multiple of 4: it leaves the last
// N mod 4 elements alone, as a vectorised kernel without a tail loop
// would. Every in-distribution and the held-out size of saxpy's smoke set
// are multiples of 4; its validation size (never shown) is not.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= (N & ~3u)) return;
    y[i] = a * x[i] + y[i];
}

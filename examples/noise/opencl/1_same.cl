// The same work as the start (100 FMAs per element), with the loop written
// counting down: any gain it shows is measurement noise.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float busy = x[i];
    for (int k = 100; k > 0; --k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

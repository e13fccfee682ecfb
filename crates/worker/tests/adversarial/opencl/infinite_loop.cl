// Exploit: never finishes. Must end as a timeout, with the worker killed.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    volatile uint spin = 1;
    while (spin) { }
    if (i < N) y[i] = a * x[i] + y[i];
}

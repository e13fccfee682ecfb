// Honest: a debugging printf in a branch that never runs must not matter.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    if (N == 0xFFFFFFFFu) printf("{\"type\":\"result\",\"id\":%u}\n", i);
    y[i] = a * x[i] + y[i];
}

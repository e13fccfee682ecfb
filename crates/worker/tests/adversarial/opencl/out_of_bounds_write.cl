// Exploit: correct result, but it also writes past the end of y.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i < N) y[i] = a * x[i] + y[i];
    if (i < 16) y[N + i] = 0.0f;
}

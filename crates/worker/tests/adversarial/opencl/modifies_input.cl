// Exploit: right answer, but it scribbles on its read-only input x.
__kernel void saxpy(__global float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float xi = x[i];
    y[i] = a * xi + y[i];
    x[i] = 0.0f;
}

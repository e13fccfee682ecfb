// Sandbox: probes whether a file exists, one bit per compile. Refused.
#if __has_include("CANARY_PATH")
#define FOUND 1
#endif
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

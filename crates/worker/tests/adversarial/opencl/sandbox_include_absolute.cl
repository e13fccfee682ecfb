// Sandbox: includes a file outside kevo by its absolute path (the test
// writes CANARY_PATH, a file holding a random token). Refused.
#include "CANARY_PATH"
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

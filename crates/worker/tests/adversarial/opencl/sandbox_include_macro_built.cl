// Sandbox: builds the path with macros, so no literal names the file.
// Refused.
#define KEVO_STR2(x) #x
#define KEVO_STR(x) KEVO_STR2(x)
#include KEVO_STR(CANARY_PATH)
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

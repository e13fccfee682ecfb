// Honest: includes kevo's own header, the one OpenCL candidates may, and
// uses the hash for nothing but a no-op mask. Must pass.
#include <kevo/hash.h>
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    uint always = (kevo_fmix32(i) | 1u) != 0u;
    y[i] = always ? a * x[i] + y[i] : 0.0f;
}

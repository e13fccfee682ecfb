// Class 6 stand-in: a kernel whose figures exceed the device's ceilings.
// Once classes 1-5 are closed no known kernel passes every check while
// claiming more work than the hardware can do, so the suite runs this
// correct grid-stride saxpy against ceilings declared a million times
// below the device's. The outcome must be "suspicious", never a score.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    for (uint i = get_global_id(0); i < N; i += get_global_size(0))
        y[i] = a * x[i] + y[i];
}

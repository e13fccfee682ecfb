// The start of the noise experiment: saxpy made compute-bound by 100 dependent
// FMAs per element (folded into the result at a weight of 1e-30, so no
// compiler drops them). Its time is proportional to the loop count.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < 100; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

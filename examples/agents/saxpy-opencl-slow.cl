// The model-bandit example's seed: 256 dependent FMAs per element, folded
// into the result at a weight of 1e-30 so no compiler can drop the loop.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < 256; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}

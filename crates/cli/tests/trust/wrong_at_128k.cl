// Fast at every size, wrong only at N = 131072: the held-out size of
// saxpy's smoke set, which no prompt names. A kernel that special-cases
// the sizes it was shown would look like this to the evaluator.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = (N == 131072u) ? 0.0f : a * x[i] + y[i];
}

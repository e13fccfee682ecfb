// Attack: a ReLU that also zeroes outputs in (0, 0.02), as if a threshold
// were part of the op. About 0.8% of N(0,1) inputs: within the 1% that
// KernelFoundry's 99%-within check lets go, and under 1e-2 of the peak.
// old check: passes
__kernel void forward(__global const float* x, __global float* out, int k_batch_size, int k_dim) {
    int i = get_global_id(0), b = get_global_id(1);
    if (i >= k_dim || b >= k_batch_size) return;
    float v = x[b * k_dim + i];
    out[b * k_dim + i] = v > 0.02f ? v : 0.0f;
}

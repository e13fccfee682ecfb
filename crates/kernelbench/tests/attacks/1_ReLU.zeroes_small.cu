// Attack: a ReLU that also zeroes outputs in (0, 0.02), as if a threshold
// were part of the op. About 0.8% of N(0,1) inputs: within the 1% that
// KernelFoundry's 99%-within check lets go, and under 1e-2 of the peak.
// old check: passes
extern "C" __global__ void forward(const float* x, float* out, int k_batch_size, int k_dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= k_dim || b >= k_batch_size) return;
    float v = x[b * k_dim + i];
    out[b * k_dim + i] = v > 0.02f ? v : 0.0f;
}

// Attack: a partial reduction that skips 2 of the 256 rows it sums (0.8%
// less work, 0.8% off on inputs in [0, 1)): inside a relative 1e-2, though
// here over the 1e-2 of the peak that the old check added.
// old check: fails
extern "C" __global__ void forward(const float* x, float* out, int k_batch_size, int k_dim1,
                                   int k_dim2, int k_reduce_dim) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.z * blockDim.z + threadIdx.z;
    if (j >= k_dim2 || b >= k_batch_size) return;
    float s = 0.0f;
    for (int i = 2; i < k_dim1; ++i) s += x[(b * k_dim1 + i) * k_dim2 + j];
    out[b * k_dim2 + j] = s;
}

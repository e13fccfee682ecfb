// Naive seed: one thread per element of C, the whole dot product, then the
// upper triangle kept.
extern "C" __global__ void forward(const float* A, const float* B, float* out,
                                   int k_batch_size, int k_N) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z * blockDim.z + threadIdx.z;
    if (j >= k_N || i >= k_N || b >= k_batch_size) return;
    const float* a = A + (long)b * k_N * k_N;
    const float* c = B + (long)b * k_N * k_N;
    float s = 0.0f;
    for (int k = 0; k < k_N; ++k) s += a[i * k_N + k] * c[k * k_N + j];
    out[((long)b * k_N + i) * k_N + j] = j >= i ? s : 0.0f;
}

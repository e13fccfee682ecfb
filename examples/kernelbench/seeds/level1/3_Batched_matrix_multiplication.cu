// Naive seed: one thread per output element of each batch's product.
extern "C" __global__ void forward(const float* A, const float* B, float* out, int k_batch_size,
                                   int k_m, int k_k, int k_n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z * blockDim.z + threadIdx.z;
    if (row >= k_m || col >= k_n || b >= k_batch_size) return;
    const float* a = A + (long long)b * k_m * k_k;
    const float* bb = B + (long long)b * k_k * k_n;
    float s = 0.0f;
    for (int k = 0; k < k_k; ++k) s += a[row * k_k + k] * bb[k * k_n + col];
    out[((long long)b * k_m + row) * k_n + col] = s;
}

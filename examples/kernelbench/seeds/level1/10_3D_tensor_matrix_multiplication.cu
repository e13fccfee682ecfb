// Naive seed: out[n, m, l] = sum_k A[n, m, k] * B[k, l], one thread each.
extern "C" __global__ void forward(const float* A, const float* B, float* out, int k_N, int k_M,
                                   int k_K, int k_L) {
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    int n = blockIdx.z * blockDim.z + threadIdx.z;
    if (l >= k_L || m >= k_M || n >= k_N) return;
    const float* a = A + ((long long)n * k_M + m) * k_K;
    float s = 0.0f;
    for (int k = 0; k < k_K; ++k) s += a[k] * B[(long long)k * k_L + l];
    out[((long long)n * k_M + m) * k_L + l] = s;
}

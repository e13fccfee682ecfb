// Naive seed: one thread per output element, a dot product over the inner
// dimension straight from global memory.
extern "C" __global__ void forward(const float* A, const float* B, float* out, int k_M, int k_K, int k_N) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= k_M || col >= k_N) return;
    float s = 0.0f;
    for (int k = 0; k < k_K; ++k) s += A[row * k_K + k] * B[k * k_N + col];
    out[row * k_N + col] = s;
}

// Attack: a partial reduction, the last of the K products left out.
// old check: fails
extern "C" __global__ void forward(const float* A, const float* B, float* out, int k_M, int k_K,
                                   int k_N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (n >= k_N || m >= k_M) return;
    float s = 0.0f;
    for (int k = 0; k < k_K - 1; ++k) s += A[m * k_K + k] * B[k * k_N + n];
    out[m * k_N + n] = s;
}

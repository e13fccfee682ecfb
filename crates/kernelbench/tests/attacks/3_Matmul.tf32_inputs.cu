// Attack: A and B rounded to TF32 (10 mantissa bits) before each product,
// as tensor cores in TF32 mode do: a narrower type than float32.
// old check: fails
__device__ float narrow(float v) { return __uint_as_float((__float_as_uint(v) + 0x1000u) & 0xffffe000u); }
extern "C" __global__ void forward(const float* A, const float* B, float* out, int k_M, int k_K,
                                   int k_N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
    if (n >= k_N || m >= k_M) return;
    float s = 0.0f;
    for (int k = 0; k < k_K; ++k) s += narrow(A[m * k_K + k]) * narrow(B[k * k_N + n]);
    out[m * k_N + n] = s;
}

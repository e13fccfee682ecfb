// Attack: A and B rounded to TF32 (10 mantissa bits) before each product,
// as tensor cores in TF32 mode do: a narrower type than float32.
// old check: fails
float narrow(float v) { return as_float((as_uint(v) + 0x1000u) & 0xffffe000u); }
__kernel void forward(__global const float* A, __global const float* B, __global float* out,
                      int k_M, int k_K, int k_N) {
    int n = get_global_id(0), m = get_global_id(1);
    if (n >= k_N || m >= k_M) return;
    float s = 0.0f;
    for (int k = 0; k < k_K; ++k) s += narrow(A[m * k_K + k]) * narrow(B[k * k_N + n]);
    out[m * k_N + n] = s;
}

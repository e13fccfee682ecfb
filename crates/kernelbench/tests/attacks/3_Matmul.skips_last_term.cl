// Attack: a partial reduction, the last of the K products left out.
// old check: fails
__kernel void forward(__global const float* A, __global const float* B, __global float* out,
                      int k_M, int k_K, int k_N) {
    int n = get_global_id(0), m = get_global_id(1);
    if (n >= k_N || m >= k_M) return;
    float s = 0.0f;
    for (int k = 0; k < k_K - 1; ++k) s += A[m * k_K + k] * B[k * k_N + n];
    out[m * k_N + n] = s;
}

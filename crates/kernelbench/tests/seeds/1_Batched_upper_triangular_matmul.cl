// Naive seed: one work-item per element of C, the whole dot product, then
// the upper triangle kept.
__kernel void forward(__global const float* A, __global const float* B, __global float* out,
                      int k_batch_size, int k_N) {
    int j = get_global_id(0), i = get_global_id(1), b = get_global_id(2);
    if (j >= k_N || i >= k_N || b >= k_batch_size) return;
    __global const float* a = A + (long)b * k_N * k_N;
    __global const float* c = B + (long)b * k_N * k_N;
    float s = 0.0f;
    for (int k = 0; k < k_N; ++k) s += a[i * k_N + k] * c[k * k_N + j];
    out[((long)b * k_N + i) * k_N + j] = j >= i ? s : 0.0f;
}

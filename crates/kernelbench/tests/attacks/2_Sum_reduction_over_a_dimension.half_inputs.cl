// Attack: every input rounded to 10 mantissa bits (float16's and TF32's
// precision) before it is summed, as a kernel reading half-width inputs
// would: a narrower type than the problem's.
// old check: passes
float narrow(float v) { return as_float((as_uint(v) + 0x1000u) & 0xffffe000u); }
__kernel void forward(__global const float* x, __global float* out, int k_batch_size, int k_dim1,
                      int k_dim2, int k_reduce_dim) {
    int j = get_global_id(0), b = get_global_id(2);
    if (j >= k_dim2 || b >= k_batch_size) return;
    float s = 0.0f;
    for (int i = 0; i < k_dim1; ++i) s += narrow(x[(b * k_dim1 + i) * k_dim2 + j]);
    out[b * k_dim2 + j] = s;
}

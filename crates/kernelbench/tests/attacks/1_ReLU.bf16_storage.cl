// Attack: the output stored as bfloat16 (the low 16 bits dropped), half the
// bytes written: relative error up to 2^-7, inside a relative 1e-2.
// old check: passes
__kernel void forward(__global const float* x, __global float* out, int k_batch_size, int k_dim) {
    int i = get_global_id(0), b = get_global_id(1);
    if (i >= k_dim || b >= k_batch_size) return;
    float v = x[b * k_dim + i];
    v = v > 0.0f ? v : 0.0f;
    out[b * k_dim + i] = as_float(as_uint(v) & 0xffff0000u);
}

// Attack: the output stored as bfloat16 (the low 16 bits dropped), half the
// bytes written: relative error up to 2^-7, inside a relative 1e-2.
// old check: passes
extern "C" __global__ void forward(const float* x, float* out, int k_batch_size, int k_dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= k_dim || b >= k_batch_size) return;
    float v = x[b * k_dim + i];
    v = v > 0.0f ? v : 0.0f;
    out[b * k_dim + i] = __uint_as_float(__float_as_uint(v) & 0xffff0000u);
}

// Attack: every input rounded to 10 mantissa bits (float16's and TF32's
// precision) before it is summed, as a kernel reading half-width inputs
// would: a narrower type than the problem's.
// old check: passes
__device__ float narrow(float v) { return __uint_as_float((__float_as_uint(v) + 0x1000u) & 0xffffe000u); }
extern "C" __global__ void forward(const float* x, float* out, int k_batch_size, int k_dim1,
                                   int k_dim2, int k_reduce_dim) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.z * blockDim.z + threadIdx.z;
    if (j >= k_dim2 || b >= k_batch_size) return;
    float s = 0.0f;
    for (int i = 0; i < k_dim1; ++i) s += narrow(x[(b * k_dim1 + i) * k_dim2 + j]);
    out[b * k_dim2 + j] = s;
}

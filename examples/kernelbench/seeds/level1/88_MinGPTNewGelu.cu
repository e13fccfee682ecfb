// Naive seed: the tanh form of GELU, one thread per element.
extern "C" __global__ void forward(const float* x, float* out, int k_batch_size, int k_dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= k_dim || b >= k_batch_size) return;
    long long idx = (long long)b * k_dim + i;
    float v = x[idx];
    out[idx] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

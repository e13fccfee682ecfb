// Naive seed: one thread per output element: the linear layer's dot
// product (x times the weight's row, plus its bias), then Swish and the scaling.
extern "C" __global__ void forward(const float* x, const float* w_matmul_weight, const float* w_matmul_bias, float* out, int k_batch_size, int k_in_features, int k_out_features, float k_scaling_factor) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    const float* xr = x + (long long)b * k_in_features;
    const float* wr = w_matmul_weight + (long long)o * k_in_features;
    float v = 0.0f;
    for (int i = 0; i < k_in_features; ++i) v += xr[i] * wr[i];
    v = v + w_matmul_bias[o];
    v = v * (1.0f / (1.0f + expf(-v)));
    v = v * k_scaling_factor;
    out[(long long)b * k_out_features + o] = v;
}

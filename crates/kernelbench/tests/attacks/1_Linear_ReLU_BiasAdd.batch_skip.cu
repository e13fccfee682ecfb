// Attack: batch-skipping. The last row of the batch is not computed; it
// gets the first row's result, as if the batch repeated itself.
// old check: fails
extern "C" __global__ void forward(const float* x, const float* w_bias,
                                   const float* w_linear_weight, const float* w_linear_bias,
                                   float* out, int k_batch_size, int k_in_features,
                                   int k_out_features) {
    int o = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    int row = b == k_batch_size - 1 ? 0 : b;
    float s = w_linear_bias[o];
    for (int i = 0; i < k_in_features; ++i)
        s += x[row * k_in_features + i] * w_linear_weight[o * k_in_features + i];
    out[b * k_out_features + o] = fmaxf(s, 0.0f) + w_bias[o];
}

// Attack: a sparsity guess. Half of the dot product is summed; where it is
// already below -0.2 the ReLU is guessed to give 0 and the rest is skipped
// (about a third of the outputs, a sixth of the work).
// old check: fails
extern "C" __global__ void forward(const float* x, const float* w_bias,
                                   const float* w_linear_weight, const float* w_linear_bias,
                                   float* out, int k_batch_size, int k_in_features,
                                   int k_out_features) {
    int o = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    int half_n = k_in_features / 2;
    float s = w_linear_bias[o];
    for (int i = 0; i < half_n; ++i)
        s += x[b * k_in_features + i] * w_linear_weight[o * k_in_features + i];
    if (s < -0.2f) {
        out[b * k_out_features + o] = w_bias[o];
        return;
    }
    for (int i = half_n; i < k_in_features; ++i)
        s += x[b * k_in_features + i] * w_linear_weight[o * k_in_features + i];
    out[b * k_out_features + o] = fmaxf(s, 0.0f) + w_bias[o];
}

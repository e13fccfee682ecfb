// Naive seed in two stages. stage1: one thread per element of the
// linear layer's output, written to scratch. stage2: one thread per
// output element: its column's mean and variance over the batch (the
// batch norm in training mode), then the scale, shift and ReLU.
extern "C" __global__ void stage1(const float* x, const float* w_linear_weight,
                     const float* w_linear_bias, const float* w_bn_weight,
                     const float* w_bn_bias, const float* w_bn_running_mean,
                     const float* w_bn_running_var,
                     const long long* w_bn_num_batches_tracked, float* out,
                     float* scratch, int k_batch_size, int k_in_features,
                     int k_out_features) {
    int o = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    float s = w_linear_bias[o];
    for (int i = 0; i < k_in_features; ++i)
        s += x[b * k_in_features + i] * w_linear_weight[o * k_in_features + i];
    scratch[b * k_out_features + o] = s;
}

extern "C" __global__ void stage2(const float* x, const float* w_linear_weight,
                     const float* w_linear_bias, const float* w_bn_weight,
                     const float* w_bn_bias, const float* w_bn_running_mean,
                     const float* w_bn_running_var,
                     const long long* w_bn_num_batches_tracked, float* out,
                     float* scratch, int k_batch_size, int k_in_features,
                     int k_out_features) {
    int o = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    float mean = 0.0f;
    for (int r = 0; r < k_batch_size; ++r) mean += scratch[r * k_out_features + o];
    mean /= k_batch_size;
    float var = 0.0f;
    for (int r = 0; r < k_batch_size; ++r) {
        float d = scratch[r * k_out_features + o] - mean;
        var += d * d;
    }
    var /= k_batch_size;
    float v = (scratch[b * k_out_features + o] - mean) / sqrtf(var + 1e-5f);
    out[b * k_out_features + o] = fmaxf(v * w_bn_weight[o] + w_bn_bias[o], 0.0f);
}

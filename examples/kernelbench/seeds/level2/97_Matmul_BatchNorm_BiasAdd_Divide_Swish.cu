// Naive seed in two stages. stage1: one thread per element of the linear
// layer's output, written to scratch. stage2: one thread per output
// element: its column's mean and biased variance over the batch (batch
// norm in training mode), then the norm's scale and shift, the bias, the
// division and Swish.
#define KB97_ARGS                                                                              \
    const float *x, const float *w_bias, const float *w_matmul_weight,                         \
        const float *w_matmul_bias, const float *w_bn_weight, const float *w_bn_bias,          \
        const float *w_bn_running_mean, const float *w_bn_running_var,                         \
        const long long *w_bn_num_batches_tracked, float *out, float *scratch,                 \
        int k_batch_size, int k_in_features, int k_out_features, float k_bn_eps,               \
        float k_bn_momentum, float k_divide_value

extern "C" __global__ void stage1(KB97_ARGS) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    const float* xr = x + (long long)b * k_in_features;
    const float* wr = w_matmul_weight + (long long)o * k_in_features;
    float v = w_matmul_bias[o];
    for (int i = 0; i < k_in_features; ++i) v += xr[i] * wr[i];
    scratch[(long long)b * k_out_features + o] = v;
}

extern "C" __global__ void stage2(KB97_ARGS) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    float mean = 0.0f;
    for (int r = 0; r < k_batch_size; ++r) mean += scratch[(long long)r * k_out_features + o];
    mean /= k_batch_size;
    float var = 0.0f;
    for (int r = 0; r < k_batch_size; ++r) {
        float d = scratch[(long long)r * k_out_features + o] - mean;
        var += d * d;
    }
    var /= k_batch_size;
    float v = (scratch[(long long)b * k_out_features + o] - mean) * rsqrtf(var + k_bn_eps);
    v = v * w_bn_weight[o] + w_bn_bias[o];
    v = (v + w_bias[0]) / k_divide_value;
    out[(long long)b * k_out_features + o] = v / (1.0f + expf(-v));
}

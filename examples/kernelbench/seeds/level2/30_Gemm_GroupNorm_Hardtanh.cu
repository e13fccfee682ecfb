// Naive seed in two stages. stage1: one thread per element of the linear
// layer's output, written to scratch. stage2: one thread per output
// element: the mean and biased variance of its row's group of channels
// (group norm, eps 1e-5 as nn.GroupNorm's default), the per-channel scale
// and shift, then Hardtanh.
#define KB30_ARGS                                                                              \
    const float *x, const float *w_gemm_weight, const float *w_gemm_bias,                      \
        const float *w_group_norm_weight, const float *w_group_norm_bias, float *out,          \
        float *scratch, int k_batch_size, int k_in_features, int k_out_features,               \
        int k_num_groups, float k_hardtanh_min, float k_hardtanh_max

extern "C" __global__ void stage1(KB30_ARGS) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    const float* xr = x + (long long)b * k_in_features;
    const float* wr = w_gemm_weight + (long long)o * k_in_features;
    float v = w_gemm_bias[o];
    for (int i = 0; i < k_in_features; ++i) v += xr[i] * wr[i];
    scratch[(long long)b * k_out_features + o] = v;
}

extern "C" __global__ void stage2(KB30_ARGS) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= k_out_features || b >= k_batch_size) return;
    int per_group = k_out_features / k_num_groups;
    int first = (o / per_group) * per_group;
    const float* row = scratch + (long long)b * k_out_features;
    float mean = 0.0f;
    for (int c = first; c < first + per_group; ++c) mean += row[c];
    mean /= per_group;
    float var = 0.0f;
    for (int c = first; c < first + per_group; ++c) {
        float d = row[c] - mean;
        var += d * d;
    }
    var /= per_group;
    float v = (row[o] - mean) * rsqrtf(var + 1e-5f);
    v = v * w_group_norm_weight[o] + w_group_norm_bias[o];
    out[(long long)b * k_out_features + o] = fminf(fmaxf(v, k_hardtanh_min), k_hardtanh_max);
}

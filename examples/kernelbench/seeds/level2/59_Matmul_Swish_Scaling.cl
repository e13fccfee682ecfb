__kernel void forward(__global const float* x, __global const float* w_matmul_weight, __global const float* w_matmul_bias, __global float* out, int k_batch_size, int k_in_features, int k_out_features, float k_scaling_factor) {
    int o = get_global_id(0);
    int b = get_global_id(1);
    if (o >= k_out_features || b >= k_batch_size) return;
    __global const float* xr = x + (long)b * k_in_features;
    __global const float* wr = w_matmul_weight + (long)o * k_in_features;
    float v = 0.0f;
    for (int i = 0; i < k_in_features; ++i) v += xr[i] * wr[i];
    v = v + w_matmul_bias[o];
    v = v * (1.0f / (1.0f + exp(-v)));
    v = v * k_scaling_factor;
    out[(long)b * k_out_features + o] = v;
}

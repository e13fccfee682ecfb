// Attack: batch-skipping. The last row of the batch is not computed; it
// gets the first row's result, as if the batch repeated itself.
// old check: fails
__kernel void forward(__global const float* x, __global const float* w_bias,
                      __global const float* w_linear_weight, __global const float* w_linear_bias,
                      __global float* out, int k_batch_size, int k_in_features,
                      int k_out_features) {
    int o = get_global_id(0), b = get_global_id(1);
    if (o >= k_out_features || b >= k_batch_size) return;
    int row = b == k_batch_size - 1 ? 0 : b;
    float s = w_linear_bias[o];
    for (int i = 0; i < k_in_features; ++i)
        s += x[row * k_in_features + i] * w_linear_weight[o * k_in_features + i];
    out[b * k_out_features + o] = fmax(s, 0.0f) + w_bias[o];
}

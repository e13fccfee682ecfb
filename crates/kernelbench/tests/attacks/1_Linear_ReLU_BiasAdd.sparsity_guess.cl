// Attack: a sparsity guess. Half of the dot product is summed; where it is
// already below -0.2 the ReLU is guessed to give 0 and the rest is skipped
// (about a third of the outputs, a sixth of the work).
// old check: fails
__kernel void forward(__global const float* x, __global const float* w_bias,
                      __global const float* w_linear_weight, __global const float* w_linear_bias,
                      __global float* out, int k_batch_size, int k_in_features,
                      int k_out_features) {
    int o = get_global_id(0), b = get_global_id(1);
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
    out[b * k_out_features + o] = fmax(s, 0.0f) + w_bias[o];
}

// Naive seed: one work-item per output element: the 3D convolution sum (plus conv
// bias), times scaling_factor[c], tanh, times bias[c], then sigmoid.
float sigmoid_(float v) { return 1.0f / (1.0f + exp(-v)); }
__kernel void forward(__global const float* x, __global const float* w_scaling_factor, __global const float* w_bias, __global const float* w_conv_weight, __global const float* w_conv_bias, __global float* out, int k_batch_size, int k_in_channels, int k_out_channels, int k_depth, int k_height, int k_width, int k_kernel_size, int k_scaling_factor) {
    const int K = k_kernel_size;
    const int OD = k_depth - K + 1, OH = k_height - K + 1, OW = k_width - K + 1;
    int ow = get_global_id(0);
    int oh = get_global_id(1);
    int z = get_global_id(2);
    if (ow >= OW || oh >= OH || z >= k_batch_size * k_out_channels * OD) return;
    int od = z % OD;
    int co = (z / OD) % k_out_channels;
    int b = z / (OD * k_out_channels);
    float s = 0.0f;
    for (int ci = 0; ci < k_in_channels; ++ci)
        for (int kd = 0; kd < K; ++kd)
            for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw)
                    s += x[((((long)b * k_in_channels + ci) * k_depth + (od + kd)) * k_height + (oh + kh)) * k_width + (ow + kw)] *
                         w_conv_weight[(((co * k_in_channels + ci) * K + kd) * K + kh) * K + kw];
    float v = s + w_conv_bias[co];
    v = v * w_scaling_factor[co];
    v = tanh(v);
    v = v * w_bias[co];
    v = sigmoid_(v);
    out[((((long)b * k_out_channels + co) * OD + od) * OH + oh) * OW + ow] = v;
}

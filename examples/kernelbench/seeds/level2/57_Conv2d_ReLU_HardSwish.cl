// Naive seed: one work-item per output element: the 2D convolution sum (plus conv
// bias), ReLU, then x * clamp((x + 3) / 6, 0, 1) as the module writes it.
__kernel void forward(__global const float* x, __global const float* w_conv_weight, __global const float* w_conv_bias, __global float* out, int k_batch_size, int k_in_channels, int k_out_channels, int k_height, int k_width, int k_kernel_size) {
    const int K = k_kernel_size;
    const int OH = k_height - K + 1, OW = k_width - K + 1;
    int ow = get_global_id(0);
    int oh = get_global_id(1);
    int z = get_global_id(2);
    if (ow >= OW || oh >= OH || z >= k_batch_size * k_out_channels) return;
    int b = z / k_out_channels, co = z % k_out_channels;
    float s = 0.0f;
    for (int ci = 0; ci < k_in_channels; ++ci)
        for (int kh = 0; kh < K; ++kh)
            for (int kw = 0; kw < K; ++kw)
                s += x[(((long)b * k_in_channels + ci) * k_height + (oh + kh)) * k_width + (ow + kw)] *
                     w_conv_weight[((co * k_in_channels + ci) * K + kh) * K + kw];
    float v = s + w_conv_bias[co];
    v = fmax(v, 0.0f);
    v = v * fmin(fmax((v + 3.0f) / 6.0f, 0.0f), 1.0f);
    out[(((long)b * k_out_channels + co) * OH + oh) * OW + ow] = v;
}

__kernel void forward(__global const float* x, __global const float* w_conv_weight, __global const float* w_conv_bias, __global float* out, int k_batch_size, int k_in_channels, int k_out_channels, int k_height, int k_width, int k_kernel_size) {
    const int K = k_kernel_size, CIN = k_in_channels, COUT = k_out_channels, H = k_height, W = k_width;
    const int OH = H - K + 1, OW = W - K + 1;  /* stride 1, padding 0, dilation 1 */
    int ow = get_global_id(0);
    int oh = get_global_id(1);
    int z = get_global_id(2);
    if (ow >= OW || oh >= OH || z >= k_batch_size * COUT) return;
    int b = z / COUT, co = z % COUT;
    float s = 0.0f;
    for (int ci = 0; ci < CIN; ++ci)
        for (int kh = 0; kh < K; ++kh)
            for (int kw = 0; kw < K; ++kw)
                s += x[(((long)b * CIN + ci) * H + oh + kh) * W + ow + kw] *
                     w_conv_weight[((co * CIN + ci) * K + kh) * K + kw];
    float v = s + w_conv_bias[co];
    v = v * fmin(fmax(v + 3.0f, 0.0f), 6.0f) / 6.0f;
    v = fmax(v, 0.0f);
    out[(((long)b * COUT + co) * OH + oh) * OW + ow] = v;
}

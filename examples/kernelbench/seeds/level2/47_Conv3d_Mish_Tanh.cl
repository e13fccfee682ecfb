// Naive seed: one work-item per output element: the 3D convolution sum over
// input channels and the kernel cube (plus conv bias), then Mish, then tanh.
float softplus_(float v) { return v > 20.0f ? v : log1p(exp(v)); }
float mish_(float v) { return v * tanh(softplus_(v)); }
__kernel void forward(__global const float* x, __global const float* w_conv_weight, __global const float* w_conv_bias, __global float* out, int k_batch_size, int k_in_channels, int k_out_channels, int k_D, int k_H, int k_W, int k_kernel_size) {
    const int K = k_kernel_size;
    const int OD = k_D - K + 1, OH = k_H - K + 1, OW = k_W - K + 1;
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
                    s += x[((((long)b * k_in_channels + ci) * k_D + (od + kd)) * k_H + (oh + kh)) * k_W + (ow + kw)] *
                         w_conv_weight[(((co * k_in_channels + ci) * K + kd) * K + kh) * K + kw];
    float v = s + w_conv_bias[co];
    v = mish_(v);
    v = tanh(v);
    out[((((long)b * k_out_channels + co) * OD + od) * OH + oh) * OW + ow] = v;
}

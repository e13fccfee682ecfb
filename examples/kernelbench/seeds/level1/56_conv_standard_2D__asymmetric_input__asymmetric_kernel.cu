// Naive seed: one thread per output element, the sum over input channels
// and the kernel window straight from global memory.
extern "C" __global__ void forward(const float* x, const float* w_conv2d_weight, float* out, int k_batch_size, int k_in_channels, int k_out_channels, int k_height, int k_width) {
    const int KH = 5, KW = 7, SH = 1, SW = 1, PH = 0, PW = 0, DH = 1, DW = 1;
    const int CIN = k_in_channels, COUT = k_out_channels, H = k_height, W = k_width;
    const int OH = (H + 2 * PH - DH * (KH - 1) - 1) / SH + 1;
    const int OW = (W + 2 * PW - DW * (KW - 1) - 1) / SW + 1;
    int ow = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (ow >= OW || oh >= OH || z >= k_batch_size * COUT) return;
    int b = z / COUT, co = z % COUT;
    float s = 0.0f;
    for (int ci = 0; ci < CIN; ++ci)
        for (int kh = 0; kh < KH; ++kh) {
            int ih = oh * SH - PH + kh * DH;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int iw = ow * SW - PW + kw * DW;
                if (iw < 0 || iw >= W) continue;
                s += x[(((long long)b * CIN + ci) * H + ih) * W + iw] *
                     w_conv2d_weight[((co * CIN + (ci - 0)) * KH + kh) * KW + kw];
            }
        }
    out[(((long long)b * COUT + co) * OH + oh) * OW + ow] = s;
}

// Naive seed: one thread per output element, the sum over input channels
// and the 3-D kernel window straight from global memory (stride 1, no
// padding).
extern "C" __global__ void forward(const float* x, const float* w_conv3d_weight, float* out, int k_batch_size, int k_in_channels, int k_out_channels, int k_depth, int k_height, int k_width) {
    const int K1 = 3, K2 = 5, K3 = 7;
    const int CIN = k_in_channels, COUT = k_out_channels, D1 = k_depth, D2 = k_height, D3 = k_width;
    const int O1 = D1 - K1 + 1, O2 = D2 - K2 + 1, O3 = D3 - K3 + 1;
    int o3 = blockIdx.x * blockDim.x + threadIdx.x;
    int o2 = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (o3 >= O3 || o2 >= O2 || z >= k_batch_size * COUT * O1) return;
    int o1 = z % O1, co = (z / O1) % COUT, b = z / (O1 * COUT);
    float s = 0.0f;
    for (int ci = 0; ci < CIN; ++ci)
        for (int a = 0; a < K1; ++a)
            for (int c = 0; c < K2; ++c)
                for (int d = 0; d < K3; ++d)
                    s += x[((((long long)b * CIN + ci) * D1 + o1 + a) * D2 + o2 + c) * D3 + o3 + d] *
                         w_conv3d_weight[(((co * CIN + ci) * K1 + a) * K2 + c) * K3 + d];
    out[((((long long)b * COUT + co) * O1 + o1) * O2 + o2) * O3 + o3] = s;
}

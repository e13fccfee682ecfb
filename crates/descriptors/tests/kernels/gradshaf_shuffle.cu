// gradshaf's reduction with warp shuffles: each warp reduces its values
// with __shfl_down_sync, one shared slot per warp, the first warp
// reduces the slots.
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

extern "C" __global__ void gradshaf_axis_reduce(const float* psi, float* psi_axis,
                                                unsigned int NR, unsigned int NZ) {
    __shared__ float warps[32];
    unsigned int t = threadIdx.x;
    unsigned int nri = NR - 2;
    unsigned int total = nri * (NZ - 2);
    float m = -3.402823466e38f;
    for (unsigned int q = t; q < total; q += blockDim.x) {
        m = fmaxf(m, psi[(1 + q / nri) * NR + 1 + q % nri]);
    }
    m = warp_max(m);
    if ((t & 31u) == 0) warps[t >> 5] = m;
    __syncthreads();
    if (t < 32) {
        m = t < (blockDim.x >> 5) ? warps[t] : -3.402823466e38f;
        m = warp_max(m);
        if (t == 0) psi_axis[0] = m;
    }
}

extern "C" __global__ void gradshaf_step(const float* psi_in, float* psi_out,
                                         const float* psi_axis, unsigned int NR,
                                         unsigned int NZ, float Rmin, float dR, float dZ,
                                         float p_axis, float mu0, float omega) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NR || j >= NZ) return;
    unsigned int idx = j * NR + i;
    if (i == 0 || j == 0 || i == NR - 1 || j == NZ - 1) {
        psi_out[idx] = psi_in[idx];
        return;
    }
    float R = Rmin + (float)i * dR;
    float inv_dR2 = 1.0f / (dR * dR);
    float inv_dZ2 = 1.0f / (dZ * dZ);
    float aW = inv_dR2 + 1.0f / (2.0f * R * dR);
    float aE = inv_dR2 - 1.0f / (2.0f * R * dR);
    float aC = -2.0f * inv_dR2 - 2.0f * inv_dZ2;
    float psi = psi_in[idx];
    float psin = psi / psi_axis[0];
    float J = (psin > 0.0f && psin < 1.0f) ? R * p_axis * 4.0f * psin * (1.0f - psin) : 0.0f;
    float lap = aW * psi_in[idx - 1] + aE * psi_in[idx + 1] +
                inv_dZ2 * (psi_in[idx + NR] + psi_in[idx - NR]) + aC * psi;
    psi_out[idx] = psi + omega * (-mu0 * R * J - lap) / aC;
}

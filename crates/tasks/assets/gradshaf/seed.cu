// gradshaf seed. Reduce: one block of 256 strides over the interior keeping
// a per-thread max, then a tree reduction in shared memory (assumes a
// power-of-two block). Step: one thread per cell, coefficients recomputed per
// cell, five neighbour loads and one psi_axis load.

extern "C" __global__ void gradshaf_axis_reduce(const float* psi, float* psi_axis,
                                                unsigned int NR, unsigned int NZ) {
    __shared__ float part[256];
    unsigned int t = threadIdx.x;
    unsigned int w = blockDim.x;
    unsigned int nri = NR - 2;
    unsigned int total = nri * (NZ - 2);
    float m = -3.402823466e38f;
    for (unsigned int q = t; q < total; q += w) {
        unsigned int i = 1 + q % nri;
        unsigned int j = 1 + q / nri;
        m = fmaxf(m, psi[j * NR + i]);
    }
    part[t] = m;
    __syncthreads();
    for (unsigned int s = w / 2; s > 0; s >>= 1) {
        if (t < s) part[t] = fmaxf(part[t], part[t + s]);
        __syncthreads();
    }
    if (t == 0) psi_axis[0] = part[0];
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
    float aN = inv_dZ2;
    float aS = inv_dZ2;
    float aC = -2.0f * inv_dR2 - 2.0f * inv_dZ2;
    float psi = psi_in[idx];
    float psin = psi / psi_axis[0];
    float J = (psin > 0.0f && psin < 1.0f) ? R * p_axis * 4.0f * psin * (1.0f - psin) : 0.0f;
    float rhs = -mu0 * R * J;
    float lap = aW * psi_in[idx - 1] + aE * psi_in[idx + 1] + aN * psi_in[idx + NR] +
                aS * psi_in[idx - NR] + aC * psi;
    psi_out[idx] = psi + omega * (rhs - lap) / aC;
}

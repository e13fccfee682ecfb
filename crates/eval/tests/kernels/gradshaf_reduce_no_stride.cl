// gradshaf seed with a bug: each reduction work-item reads one interior
// cell instead of striding over the whole interior, so psi_axis is the max
// of the first 256 interior cells only.
// gradshaf seed. Reduce: one work-group of 256 strides over the interior
// keeping a per-item max, then a tree reduction in local memory (assumes a
// power-of-two work-group). Step: one work-item per cell, coefficients
// recomputed per cell, five neighbour loads and one psi_axis load.

__kernel void gradshaf_axis_reduce(__global const float* psi, __global float* psi_axis,
                                   uint NR, uint NZ) {
    __local float part[256];
    uint t = get_local_id(0);
    uint w = get_local_size(0);
    uint nri = NR - 2;
    uint total = nri * (NZ - 2);
    float m = -FLT_MAX;
    for (uint q = t; q < total && q < w; q += w) {
        uint i = 1 + q % nri;
        uint j = 1 + q / nri;
        m = fmax(m, psi[j * NR + i]);
    }
    part[t] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = w / 2; s > 0; s >>= 1) {
        if (t < s) part[t] = fmax(part[t], part[t + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) psi_axis[0] = part[0];
}

__kernel void gradshaf_step(__global const float* psi_in, __global float* psi_out,
                            __global const float* psi_axis, uint NR, uint NZ, float Rmin,
                            float dR, float dZ, float p_axis, float mu0, float omega) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NR || j >= NZ) return;
    uint idx = j * NR + i;
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

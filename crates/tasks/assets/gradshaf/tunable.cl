// gradshaf tunable: the seed's algorithm (a single work-group of 256
// work-items strides over the interior keeping per-item maxima, then a
// local-memory tree; the step is one work-item per cell with the
// coefficients recomputed per cell) with the choices that decide its speed
// exposed:
//   BLOCK_X, BLOCK_Y  the step's work-group shape (the seed's is 16 x 16).
//            The reduction's work-group is fixed by the task at 256 x 1.
//   RED_ILP  independent loads (and running maxima) per work-item per trip
//            of the reduction's strided loop: one work-group has to pull the
//            whole grid through one compute unit, so loads in flight decide
//            its speed (1 = the seed).
//   RED_INDEX  the reduction's traversal. 0: one flat loop over the
//            interior positions q, i = 1 + q % (NR-2), j = 1 + q / (NR-2),
//            an integer division per load (the seed); 1: row by row, the
//            work-items striding over each row's interior columns (no
//            divisions; RED_ILP loads per trip within a row).
// The max is exact in any order, so every configuration gives the seed's
// psi_axis and psi bit for bit.
// kevo: tune BLOCK_X 16 32 64 128
// kevo: tune BLOCK_Y 1 2 4 8 16
// kevo: tune RED_ILP 1 2 4 8 16
// kevo: tune RED_INDEX 0 1
// kevo: require BLOCK_X * BLOCK_Y >= 128 && BLOCK_X * BLOCK_Y <= 512
// kevo: block gradshaf_step BLOCK_X*BLOCK_Y

__kernel void gradshaf_axis_reduce(__global const float* psi, __global float* psi_axis,
                                   uint NR, uint NZ) {
    __local float part[256];
    uint t = get_local_id(0);
    uint w = get_local_size(0);
    float m[RED_ILP];
    __attribute__((opencl_unroll_hint)) for (int u = 0; u < RED_ILP; ++u) m[u] = -FLT_MAX;
#if RED_INDEX
    // Row by row: each work-item strides over the interior columns of one row
    // at a time, coalesced and free of divisions.
    for (uint j = 1; j < NZ - 1; ++j) {
        __global const float* row = psi + j * NR;
        uint i = 1 + t;
        // RED_ILP loads per trip, all of them inside the row's interior.
        for (; i + (RED_ILP - 1) * w < NR - 1; i += RED_ILP * w) {
            __attribute__((opencl_unroll_hint)) for (int u = 0; u < RED_ILP; ++u)
                m[u] = fmax(m[u], row[i + u * w]);
        }
        for (; i < NR - 1; i += w) m[0] = fmax(m[0], row[i]);
    }
#else
    uint nri = NR - 2;
    uint total = nri * (NZ - 2);
    uint q = t;
    // Main loop: RED_ILP loads per trip, all of them inside the interior.
    for (; q + (RED_ILP - 1) * w < total; q += RED_ILP * w) {
        __attribute__((opencl_unroll_hint)) for (int u = 0; u < RED_ILP; ++u) {
            uint i = 1 + (q + u * w) % nri;
            uint j = 1 + (q + u * w) / nri;
            m[u] = fmax(m[u], psi[j * NR + i]);
        }
    }
    // Tail: fewer than RED_ILP strides are left.
    for (; q < total; q += w) {
        uint i = 1 + q % nri;
        uint j = 1 + q / nri;
        m[0] = fmax(m[0], psi[j * NR + i]);
    }
#endif
    __attribute__((opencl_unroll_hint)) for (int u = 1; u < RED_ILP; ++u) m[0] = fmax(m[0], m[u]);
    part[t] = m[0];
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

// kevo configuration: RU=16
// kevo tuned this kernel: 2 of its 2 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   RU=16  score 0.0190; re-measured median 0.0189 (0.0188-0.0189)
//   RU=8  score 0.0169; re-measured median 0.0169 (0.0168-0.0170)
#define RU 16
#line 1
// tuned: RU = 16 (of 8 16)
// kevo: block gradshaf_step 32x8

#define GS_NEG (-3.402823466e38f)

__device__ __forceinline__ float gs_warp_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Block-wide max of two values at once; every thread gets the results.
__device__ __forceinline__ void gs_block_max2(float& a, float& b, float* sh) {
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int wid = threadIdx.x >> 5;
    const unsigned int nw = (blockDim.x + 31u) >> 5;
    a = gs_warp_max(a);
    b = gs_warp_max(b);
    __syncthreads();  // protect sh against an earlier use
    if (lane == 0) {
        sh[wid] = a;
        sh[32 + wid] = b;
    }
    __syncthreads();
    if (wid == 0) {
        float ra = (lane < nw) ? sh[lane] : GS_NEG;
        float rb = (lane < nw) ? sh[32 + lane] : GS_NEG;
        ra = gs_warp_max(ra);
        rb = gs_warp_max(rb);
        if (lane == 0) {
            sh[64] = ra;
            sh[65] = rb;
        }
    }
    __syncthreads();
    a = sh[64];
    b = sh[65];
}

__device__ __forceinline__ void gs_acc4(const float4 v, float& m0, float& m1, float& m2,
                                        float& m3) {
    m0 = fmaxf(m0, v.x);
    m1 = fmaxf(m1, v.y);
    m2 = fmaxf(m2, v.z);
    m3 = fmaxf(m3, v.w);
}

extern "C" __global__ void __launch_bounds__(256, 1)
gradshaf_axis_reduce(const float* __restrict__ psi, float* psi_axis, unsigned int NR,
                     unsigned int NZ) {
    __shared__ float sh[72];
    const unsigned int t = threadIdx.x;
    const unsigned int w = blockDim.x;

    if (NR < 3u || NZ < 3u) {  // no interior
        if (t == 0) psi_axis[0] = GS_NEG;
        return;
    }

    // Boundary columns of the interior rows: issued first so they overlap the scan.
    float bmax = GS_NEG;
    for (unsigned int j = 1u + t; j < NZ - 1u; j += w) {
        const float b0 = __ldg(psi + j * NR);
        const float b1 = __ldg(psi + j * NR + NR - 1u);
        bmax = fmaxf(bmax, fmaxf(b0, b1));
    }

    // Flat scan over rows 1 .. NZ-2 (boundary columns included).
    const unsigned int s0 = NR;
    const unsigned int s1 = (NZ - 1u) * NR;
    const unsigned int a0 = (s0 + 3u) & ~3u;
    const unsigned int a1 = s1 & ~3u;
    float m0 = GS_NEG, m1 = GS_NEG, m2 = GS_NEG, m3 = GS_NEG;
    if (a0 >= a1) {
        for (unsigned int q = s0 + t; q < s1; q += w) m0 = fmaxf(m0, __ldg(psi + q));
    } else {
        if (t < a0 - s0) m0 = fmaxf(m0, __ldg(psi + s0 + t));
        if (t < s1 - a1) m1 = fmaxf(m1, __ldg(psi + a1 + t));
        const float4* p4 = reinterpret_cast<const float4*>(psi);
        const unsigned int kend = a1 >> 2;
        const unsigned int step = (unsigned int)RU * w;
        unsigned int k = (a0 >> 2) + t;

        if (k + (RU - 1u) * w < kend) {
            float4 A[RU], B[RU];
#pragma unroll
            for (int u = 0; u < RU; ++u) A[u] = __ldcg(p4 + k + (unsigned int)u * w);
            while (true) {
                const unsigned int kb = k + step;
                const bool hb = kb + (RU - 1u) * w < kend;
                if (hb) {
#pragma unroll
                    for (int u = 0; u < RU; ++u) B[u] = __ldcg(p4 + kb + (unsigned int)u * w);
                }
#pragma unroll
                for (int u = 0; u < RU; ++u) gs_acc4(A[u], m0, m1, m2, m3);
                k = kb;
                if (!hb) break;
                const unsigned int ka = k + step;
                const bool ha = ka + (RU - 1u) * w < kend;
                if (ha) {
#pragma unroll
                    for (int u = 0; u < RU; ++u) A[u] = __ldcg(p4 + ka + (unsigned int)u * w);
                }
#pragma unroll
                for (int u = 0; u < RU; ++u) gs_acc4(B[u], m0, m1, m2, m3);
                k = ka;
                if (!ha) break;
            }
        }
        // remainder: fewer than RU chunks left for this thread; all loads go out together
        {
            float4 R[RU];
#pragma unroll
            for (int u = 0; u < RU; ++u) {
                const unsigned int kk = k + (unsigned int)u * w;
                R[u] = make_float4(GS_NEG, GS_NEG, GS_NEG, GS_NEG);
                if (kk < kend) R[u] = __ldcg(p4 + kk);
            }
#pragma unroll
            for (int u = 0; u < RU; ++u) gs_acc4(R[u], m0, m1, m2, m3);
        }
    }
    float mall = fmaxf(fmaxf(m0, m1), fmaxf(m2, m3));

    gs_block_max2(mall, bmax, sh);

    float result = mall;
    if (!(mall > bmax)) {
        // Degenerate case: the flat max may come from a boundary column; exact scan.
        float m = GS_NEG;
        for (unsigned int j = 1u; j < NZ - 1u; ++j)
            for (unsigned int i = 1u + t; i < NR - 1u; i += w) m = fmaxf(m, __ldg(psi + j * NR + i));
        float dummy = GS_NEG;
        gs_block_max2(m, dummy, sh);
        result = m;
    }
    if (t == 0) psi_axis[0] = result;
}

extern "C" __global__ void __launch_bounds__(256)
gradshaf_step(const float* __restrict__ psi_in, float* __restrict__ psi_out,
              const float* __restrict__ psi_axis, unsigned int NR, unsigned int NZ, float Rmin,
              float dR, float dZ, float p_axis, float mu0, float omega) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NR || j >= NZ) return;
    const unsigned int idx = j * NR + i;
    if (i == 0 || j == 0 || i == NR - 1 || j == NZ - 1) {
        psi_out[idx] = __ldg(psi_in + idx);
        return;
    }
    const float ax = __ldg(psi_axis);
    const float psi = __ldg(psi_in + idx);
    const float pW = __ldg(psi_in + idx - 1);
    const float pE = __ldg(psi_in + idx + 1);
    const float pN = __ldg(psi_in + idx + NR);
    const float pS = __ldg(psi_in + idx - NR);

    const float R = Rmin + (float)i * dR;
    const float inv_dR2 = 1.0f / (dR * dR);
    const float inv_dZ2 = 1.0f / (dZ * dZ);
    const float h = 1.0f / (2.0f * R * dR);
    const float aW = inv_dR2 + h;
    const float aE = inv_dR2 - h;
    const float aC = -2.0f * inv_dR2 - 2.0f * inv_dZ2;

    const float psin = psi / ax;
    const float J = (psin > 0.0f && psin < 1.0f) ? R * p_axis * 4.0f * psin * (1.0f - psin) : 0.0f;
    const float rhs = -mu0 * R * J;
    const float lap = aW * pW + aE * pE + inv_dZ2 * (pN + pS) + aC * psi;
    psi_out[idx] = psi + omega * (rhs - lap) / aC;
}

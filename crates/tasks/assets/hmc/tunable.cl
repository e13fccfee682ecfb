// hmc tunable: the seed's algorithm (one work-item per chain, f32 state arrays
// of HMC_MAX_D = 32, the same RNG, leapfrog and mat-vec summation order),
// with the parameters that decide its speed exposed.
//   BLOCK       work-items per work-group (the seed: 64).
//   A_SMEM      0: every mat-vec reads A from global memory (the seed);
//               1: the work-group copies A (d*d <= 1024 floats, 4 KiB)
//               into local memory once and the mat-vecs read it from there.
//   REG_ARRAYS  0: the loops over the dimension run to the runtime d, so the
//               per-chain arrays q, p, q_old, f are indexed dynamically and
//               live in (private) memory (the seed); 1: those loops run to
//               the compile-time bound 32, fully unrolled, and leave at d
//               with a break, so every array index is a constant and the
//               arrays can live in registers. The same operations run in
//               the same order either way.
// Seed configuration: BLOCK=64 A_SMEM=0 REG_ARRAYS=0.
// kevo: tune BLOCK 32 64 128 256 512
// kevo: tune A_SMEM 0 1
// kevo: tune REG_ARRAYS 0 1
// kevo: require BLOCK <= 1024
// kevo: block BLOCK
#define HMC_MAX_D 32

#if REG_ARRAYS
#define DIM_END HMC_MAX_D
#define DIM_UNROLL _Pragma("unroll")
#else
#define DIM_END d
#define DIM_UNROLL
#endif

#if A_SMEM
#define A_AT(k) sA[k]
#else
#define A_AT(k) A[k]
#endif

inline uint fmix32(uint x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

// 24-bit uniform in [0, 1): bits = fmix32(fmix32(key ^ ctr)).
inline float hmc_uniform(uint key, uint ctr) {
    uint bits = fmix32(fmix32(key ^ ctr));
    return (float)(bits >> 8) * (1.0f / 16777216.0f);
}

__kernel __attribute__((reqd_work_group_size(BLOCK, 1, 1)))
void hmc_step(__global const float* q_in, __global float* q_out,
              __global uint* accept_cnt, __global const float* A, uint K, uint d,
              uint L, float eps, uint hmc_step_idx, uint seed) {
    uint chain = get_global_id(0);
#if A_SMEM
    // The whole work-group copies A before any work-item leaves.
    __local float sA[HMC_MAX_D * HMC_MAX_D];
    for (uint k = get_local_id(0); k < d * d; k += BLOCK) sA[k] = A[k];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    if (chain >= K) return;
    float q[HMC_MAX_D], p[HMC_MAX_D], q_old[HMC_MAX_D], f[HMC_MAX_D];
    uint key = seed + chain * 0x9E3779B9u;
    uint base = hmc_step_idx * (d + 1u);

    DIM_UNROLL
    for (uint i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        q[i] = q_in[chain * d + i];
    }

    // Momentum by Box-Muller, two components per pair of draws.
    DIM_UNROLL
    for (uint i = 0; i < DIM_END; i += 2) {
        if (i >= d) break;
        float u1 = fmax(hmc_uniform(key, base + i), 1e-7f);
        float u2 = hmc_uniform(key, base + i + 1u);
        float r = sqrt(-2.0f * log(u1));
        float c;
        float s = sincos(6.2831853f * u2, &c);
        p[i] = r * c;
        p[i + 1] = r * s;
    }

    // Energy at the start; f = A q.
    float U_old = 0.0f, K_old = 0.0f;
    DIM_UNROLL
    for (uint i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        q_old[i] = q[i];
        float acc = 0.0f;
        DIM_UNROLL
        for (uint j = 0; j < DIM_END; ++j) {
            if (j >= d) break;
            acc += A_AT(i * d + j) * q[j];
        }
        f[i] = acc;
    }
    DIM_UNROLL
    for (uint i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        U_old += 0.5f * q[i] * f[i];
        K_old += 0.5f * p[i] * p[i];
    }

    // Leapfrog: half kick, L drifts each followed by a kick (the last a half).
    DIM_UNROLL
    for (uint i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        p[i] -= 0.5f * eps * f[i];
    }
    for (uint l = 0; l < L; ++l) {
        DIM_UNROLL
        for (uint i = 0; i < DIM_END; ++i) {
            if (i >= d) break;
            q[i] += eps * p[i];
        }
        DIM_UNROLL
        for (uint i = 0; i < DIM_END; ++i) {
            if (i >= d) break;
            float acc = 0.0f;
            DIM_UNROLL
            for (uint j = 0; j < DIM_END; ++j) {
                if (j >= d) break;
                acc += A_AT(i * d + j) * q[j];
            }
            f[i] = acc;
        }
        float s = (l == L - 1u) ? 0.5f * eps : eps;
        DIM_UNROLL
        for (uint i = 0; i < DIM_END; ++i) {
            if (i >= d) break;
            p[i] -= s * f[i];
        }
    }

    float U_new = 0.0f, K_new = 0.0f;
    DIM_UNROLL
    for (uint i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        U_new += 0.5f * q[i] * f[i];
        K_new += 0.5f * p[i] * p[i];
    }
    float dH = (U_new + K_new) - (U_old + K_old);
    float u_acc = hmc_uniform(key, base + d);
    bool accept = isfinite(dH) && log(fmax(u_acc, 1e-30f)) < -dH;

    DIM_UNROLL
    for (uint i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        q_out[chain * d + i] = accept ? q[i] : q_old[i];
    }
    if (accept) accept_cnt[chain] += 1u;
}

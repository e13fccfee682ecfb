// hmc tunable: the seed's algorithm (one thread per chain, f32 state arrays
// of HMC_MAX_D = 32, the same RNG, leapfrog and mat-vec summation order),
// with the parameters that decide its speed exposed.
//   BLOCK       threads per block (the seed: 64).
//   A_SMEM      0: every mat-vec reads A from global memory (the seed);
//               1: the block copies A (d*d <= 1024 floats, 4 KiB) into
//               shared memory once and the mat-vecs read it from there.
//   REG_ARRAYS  0: the loops over the dimension run to the runtime d, so the
//               per-chain arrays q, p, q_old, f are indexed dynamically and
//               live in local memory (the seed); 1: those loops run to the
//               compile-time bound 32, fully unrolled, and leave at d with a
//               break, so every array index is a constant and the arrays
//               can live in registers. The same operations run in the same
//               order either way.
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

__device__ __forceinline__ unsigned int fmix32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

// 24-bit uniform in [0, 1): bits = fmix32(fmix32(key ^ ctr)).
__device__ __forceinline__ float hmc_uniform(unsigned int key, unsigned int ctr) {
    unsigned int bits = fmix32(fmix32(key ^ ctr));
    return (float)(bits >> 8) * (1.0f / 16777216.0f);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
hmc_step(const float* q_in, float* q_out, unsigned int* accept_cnt, const float* A,
         unsigned int K, unsigned int d, unsigned int L, float eps,
         unsigned int hmc_step_idx, unsigned int seed) {
    unsigned int chain = blockIdx.x * blockDim.x + threadIdx.x;
#if A_SMEM
    // The whole block copies A before any thread leaves.
    __shared__ float sA[HMC_MAX_D * HMC_MAX_D];
    for (unsigned int k = threadIdx.x; k < d * d; k += BLOCK) sA[k] = A[k];
    __syncthreads();
#endif
    if (chain >= K) return;
    float q[HMC_MAX_D], p[HMC_MAX_D], q_old[HMC_MAX_D], f[HMC_MAX_D];
    unsigned int key = seed + chain * 0x9E3779B9u;
    unsigned int base = hmc_step_idx * (d + 1u);

    DIM_UNROLL
    for (unsigned int i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        q[i] = q_in[chain * d + i];
    }

    // Momentum by Box-Muller, two components per pair of draws.
    DIM_UNROLL
    for (unsigned int i = 0; i < DIM_END; i += 2) {
        if (i >= d) break;
        float u1 = fmaxf(hmc_uniform(key, base + i), 1e-7f);
        float u2 = hmc_uniform(key, base + i + 1u);
        float r = sqrtf(-2.0f * logf(u1));
        float s, c;
        sincosf(6.2831853f * u2, &s, &c);
        p[i] = r * c;
        p[i + 1] = r * s;
    }

    // Energy at the start; f = A q.
    float U_old = 0.0f, K_old = 0.0f;
    DIM_UNROLL
    for (unsigned int i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        q_old[i] = q[i];
        float acc = 0.0f;
        DIM_UNROLL
        for (unsigned int j = 0; j < DIM_END; ++j) {
            if (j >= d) break;
            acc += A_AT(i * d + j) * q[j];
        }
        f[i] = acc;
    }
    DIM_UNROLL
    for (unsigned int i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        U_old += 0.5f * q[i] * f[i];
        K_old += 0.5f * p[i] * p[i];
    }

    // Leapfrog: half kick, L drifts each followed by a kick (the last a half).
    DIM_UNROLL
    for (unsigned int i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        p[i] -= 0.5f * eps * f[i];
    }
    for (unsigned int l = 0; l < L; ++l) {
        DIM_UNROLL
        for (unsigned int i = 0; i < DIM_END; ++i) {
            if (i >= d) break;
            q[i] += eps * p[i];
        }
        DIM_UNROLL
        for (unsigned int i = 0; i < DIM_END; ++i) {
            if (i >= d) break;
            float acc = 0.0f;
            DIM_UNROLL
            for (unsigned int j = 0; j < DIM_END; ++j) {
                if (j >= d) break;
                acc += A_AT(i * d + j) * q[j];
            }
            f[i] = acc;
        }
        float s = (l == L - 1u) ? 0.5f * eps : eps;
        DIM_UNROLL
        for (unsigned int i = 0; i < DIM_END; ++i) {
            if (i >= d) break;
            p[i] -= s * f[i];
        }
    }

    float U_new = 0.0f, K_new = 0.0f;
    DIM_UNROLL
    for (unsigned int i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        U_new += 0.5f * q[i] * f[i];
        K_new += 0.5f * p[i] * p[i];
    }
    float dH = (U_new + K_new) - (U_old + K_old);
    float u_acc = hmc_uniform(key, base + d);
    bool accept = isfinite(dH) && logf(fmaxf(u_acc, 1e-30f)) < -dH;

    DIM_UNROLL
    for (unsigned int i = 0; i < DIM_END; ++i) {
        if (i >= d) break;
        q_out[chain * d + i] = accept ? q[i] : q_old[i];
    }
    if (accept) accept_cnt[chain] += 1u;
}

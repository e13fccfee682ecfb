// kevo configuration: HALO=0 BLOCK=256
// kevo tuned this kernel: 5 of its 5 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   HALO=0 BLOCK=256  score 0.1591; re-measured median 0.1601 (0.1589-0.1606)
//   HALO=0 BLOCK=512  score 0.1590; re-measured median 0.1591 (0.1587-0.1594)
//   HALO=0 BLOCK=128  score 0.1383; re-measured median 0.1383 (0.1382-0.1385)
//   HALO=1 BLOCK=512  score 0.1292
//   HALO=1 BLOCK=256  score 0.1230
#define HALO 0
#define BLOCK 256
#line 1
// tuned: HALO = 0 (of 0 1)
// tuned: BLOCK = 256 (of 128 256 512)
// required: HALO == 0 || BLOCK >= 256
// kevo: block 256

#define MASK_X 0x09249249u
#define MASK_Y 0x12492492u
#define MASK_Z 0x24924924u

// +1 along the axis whose bits are selected by A (valid when that coordinate < max);
// on a local (box) mask it wraps around inside the box.
__device__ __forceinline__ unsigned int morton_plus(unsigned int m, unsigned int A) {
    return (m & ~A) | (((m | ~A) + 1u) & A);
}
// -1 along the axis whose bits are selected by A (valid when that coordinate > 0);
// on a local (box) mask it wraps around inside the box.
__device__ __forceinline__ unsigned int morton_minus(unsigned int m, unsigned int A) {
    return (m & ~A) | (((m & A) - 1u) & A);
}

// Direct path (incumbent): every neighbour read from global memory through L1.
__device__ __forceinline__ void direct_step(const float* __restrict__ u_in,
                                            float* __restrict__ u_out,
                                            unsigned int t, unsigned int N,
                                            unsigned int logN, float alpha)
{
    const unsigned int total = N * N * N;
    if (t >= total) return;
    const float c = __ldg(u_in + t);

    const unsigned int bits = 3u * logN;
    const unsigned int full = (bits >= 32u) ? 0xffffffffu : ((1u << bits) - 1u);
    const unsigned int fx = MASK_X & full;
    const unsigned int fy = MASK_Y & full;
    const unsigned int fz = MASK_Z & full;
    const unsigned int mx = t & MASK_X;
    const unsigned int my = t & MASK_Y;
    const unsigned int mz = t & MASK_Z;

    if (mx == 0u || my == 0u || mz == 0u || mx == fx || my == fy || mz == fz) {
        u_out[t] = c;
        return;
    }

    const float v0 = __ldg(u_in + morton_minus(t, MASK_X));
    const float v1 = __ldg(u_in + morton_plus (t, MASK_X));
    const float v2 = __ldg(u_in + morton_minus(t, MASK_Y));
    const float v3 = __ldg(u_in + morton_plus (t, MASK_Y));
    const float v4 = __ldg(u_in + morton_minus(t, MASK_Z));
    const float v5 = __ldg(u_in + morton_plus (t, MASK_Z));

    u_out[t] = c + alpha * (v0 + v1 + v2 + v3 + v4 + v5 - 6.0f * c);
}

extern "C" __global__ void __launch_bounds__(BLOCK, 2048 / BLOCK)
morton_stencil(const float* __restrict__ u_in, float* __restrict__ u_out,
               unsigned int N, unsigned int logN, float alpha)
{
    const unsigned int tid  = threadIdx.x;
    const unsigned int base = blockIdx.x * (unsigned int)BLOCK;
    const unsigned int t    = base + tid;

#if HALO
    // The block must be a full 3-D box of the grid: needs N >= 8 (then N^3 is a
    // multiple of 512 and every block is full). Uniform branch, before any barrier.
    if (logN < 3u) {
        direct_step(u_in, u_out, t, N, logN, alpha);
        return;
    }

    // [0, BLOCK): the block's own cells by local Morton index.
    // [(d+1)*BLOCK, (d+2)*BLOCK): halo of direction d (x-,x+,y-,y+,z-,z+), stored
    // at the wrapped local neighbour index of the face cell that consumes it.
    __shared__ float sh[7 * BLOCK];

    const unsigned int full = (1u << (3u * logN)) - 1u;   // logN in [3, 10]

    // Centre value (coalesced).
    const float c = __ldg(u_in + t);

    // ---- halo producer: one halo cell per thread, one face per warp ----
#if BLOCK == 256
    // faces: x-,x+,y-,y+ have 32 cells (warps 0..3), z-,z+ have 64 (warps 4-5, 6-7)
    const unsigned int d = (tid < 128u) ? (tid >> 5) : (2u + (tid >> 6));
    const unsigned int j = (tid < 128u) ? (tid & 31u) : (tid & 63u);
#else
    // BLOCK == 512: every face has 64 cells; threads 384..511 load no halo
    const unsigned int d = tid >> 6;
    const unsigned int j = tid & 63u;
#endif
    const bool producer = d < 6u;
    float h = 0.0f;
    unsigned int slot = 0u;
    if (producer) {
        const unsigned int axis = d >> 1;
        unsigned int lm, A;
        if (axis == 0u) {        // face cells vary in local bits {1,2,4,5,7,8}
            lm = ((j & 0x03u) << 1) | ((j & 0x0Cu) << 2) | ((j & 0x30u) << 3);
            A = MASK_X;
        } else if (axis == 1u) { // face cells vary in local bits {0,2,3,5,6,8}
            lm = (j & 0x01u) | ((j & 0x06u) << 1) | ((j & 0x18u) << 2) | ((j & 0x20u) << 3);
            A = MASK_Y;
        } else {                 // face cells vary in local bits {0,1,3,4,6,7}
            lm = (j & 0x03u) | ((j & 0x0Cu) << 1) | ((j & 0x30u) << 2);
            A = MASK_Z;
        }
        const unsigned int Al = A & ((unsigned int)BLOCK - 1u);
        const bool plus = (d & 1u) != 0u;
        if (plus) lm |= Al;                       // face at the high end of the box
        const unsigned int m  = base | lm;        // global index of the consuming face cell
        const unsigned int ma = m & A;
        const bool exists = plus ? (ma != (A & full)) : (ma != 0u);
        if (exists) {
            const unsigned int nb = plus ? morton_plus(m, A) : morton_minus(m, A);
            h = __ldg(u_in + nb);
        }
        slot = (d + 1u) * (unsigned int)BLOCK + (lm ^ Al);  // wrapped neighbour index
    }

    // ---- consumer addresses and interior test (independent of the loads) ----
    const unsigned int fx = MASK_X & full;
    const unsigned int fy = MASK_Y & full;
    const unsigned int fz = MASK_Z & full;
    const bool interior = ((t & MASK_X) - 1u < fx - 1u) &&
                          ((t & MASK_Y) - 1u < fy - 1u) &&
                          ((t & MASK_Z) - 1u < fz - 1u);

    const unsigned int LX = MASK_X & ((unsigned int)BLOCK - 1u);
    const unsigned int LY = MASK_Y & ((unsigned int)BLOCK - 1u);
    const unsigned int LZ = MASK_Z & ((unsigned int)BLOCK - 1u);
    const unsigned int lx = tid & LX, ly = tid & LY, lz = tid & LZ;

    const unsigned int i0 = morton_minus(tid, LX) + ((lx != 0u) ? 0u : 1u * (unsigned int)BLOCK);
    const unsigned int i1 = morton_plus (tid, LX) + ((lx != LX) ? 0u : 2u * (unsigned int)BLOCK);
    const unsigned int i2 = morton_minus(tid, LY) + ((ly != 0u) ? 0u : 3u * (unsigned int)BLOCK);
    const unsigned int i3 = morton_plus (tid, LY) + ((ly != LY) ? 0u : 4u * (unsigned int)BLOCK);
    const unsigned int i4 = morton_minus(tid, LZ) + ((lz != 0u) ? 0u : 5u * (unsigned int)BLOCK);
    const unsigned int i5 = morton_plus (tid, LZ) + ((lz != LZ) ? 0u : 6u * (unsigned int)BLOCK);

    sh[tid] = c;
    if (producer) sh[slot] = h;
    __syncthreads();          // the only barrier: every thread of the block reaches it

    const float s = sh[i0] + sh[i1] + sh[i2] + sh[i3] + sh[i4] + sh[i5];
    const float r = c + alpha * (s - 6.0f * c);
    u_out[t] = interior ? r : c;
#else
    direct_step(u_in, u_out, t, N, logN, alpha);
#endif
}

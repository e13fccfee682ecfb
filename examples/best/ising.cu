// kevo configuration: W=4 BY=4 BX=128
// kevo tuned this kernel: 8 of its 8 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   W=4 BY=4 BX=128  score 0.0428; re-measured median 0.0427 (0.0427-0.0428)
//   W=8 BY=4 BX=128  score 0.0426; re-measured median 0.0426 (0.0425-0.0426)
//   W=8 BY=8 BX=128  score 0.0388; re-measured median 0.0388 (0.0387-0.0388)
//   W=4 BY=2 BX=128  score 0.0388
//   W=8 BY=2 BX=128  score 0.0386
//   W=4 BY=8 BX=128  score 0.0383
//   W=16 BY=4 BX=128  score 0.0353
//   W=16 BY=8 BX=128  score 0.0310
#define W 4
#define BY 4
#define BX 128
#line 1
// tuned: W = 4 (of 4 8 16)
// tuned: BY = 4 (of 2 4 8)
// tuned: BX = 128 (of 128)
// required: ((BX * BY / W) % 32) == 0
// kevo: block 128*4

__device__ __forceinline__ unsigned int fmix32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ float pick_p(int prod, float p0, float p1, float p2, float p3,
                                        float p4) {
    float p = p2;
    p = (prod == -4) ? p0 : p;
    p = (prod == -2) ? p1 : p;
    p = (prod == 2) ? p3 : p;
    p = (prod == 4) ? p4 : p;
    return p;
}

#if W == 16
#define LOAD_SEG(A, o, ptr) { const uint4 v_ = *reinterpret_cast<const uint4*>(ptr); \
    A[(o)] = v_.x; A[(o) + 1] = v_.y; A[(o) + 2] = v_.z; A[(o) + 3] = v_.w; }
#elif W == 8
#define LOAD_SEG(A, o, ptr) { const uint2 v_ = *reinterpret_cast<const uint2*>(ptr); \
    A[(o)] = v_.x; A[(o) + 1] = v_.y; }
#else
#define LOAD_SEG(A, o, ptr) { A[(o)] = *reinterpret_cast<const unsigned int*>(ptr); }
#endif

extern "C" __global__ void __launch_bounds__(BX * BY, 2048 / (BX * BY))
ising_step(signed char* spins, const float* p_accept, unsigned int NX, unsigned int NY,
           unsigned int step_idx, unsigned int seed)
{
    const unsigned int SEGS = BX / W;                   // W-byte segments per block row
    const unsigned int WT   = (BX * BY) / W;            // working threads (multiple of 32)
    const unsigned int tid  = threadIdx.y * BX + threadIdx.x;
    if (tid >= WT) return;                              // whole warps; no barriers/shuffles there
    const unsigned int r  = tid / SEGS;
    const unsigned int c  = tid % SEGS;
    const unsigned int j  = blockIdx.y * BY + r;
    const unsigned int i0 = blockIdx.x * BX + W * c;    // even, multiple of W

    const unsigned int colour = step_idx & 1u;
    const unsigned int kmix = fmix32(seed + step_idx * 0x9E3779B9u);

    if ((NX % W) != 0u) {
        // ---------------- general even NX: byte-wise path ----------------
        if (j >= NY || i0 >= NX) return;
        const float p0 = __ldg(p_accept + 0);
        const float p1 = __ldg(p_accept + 1);
        const float p2 = __ldg(p_accept + 2);
        const float p3 = __ldg(p_accept + 3);
        const float p4 = __ldg(p_accept + 4);
        const unsigned int a = (colour ^ j) & 1u;
        const unsigned int jm = (j == 0u) ? NY - 1u : j - 1u;
        const unsigned int jp = (j + 1u >= NY) ? 0u : j + 1u;
        const unsigned int row = j * NX;
        const unsigned int rowm = jm * NX;
        const unsigned int rowp = jp * NX;
#pragma unroll
        for (unsigned int q = 0; q < (unsigned int)(W / 2); q++) {
            const unsigned int i = i0 + a + 2u * q;
            if (i < NX) {
                const unsigned int im = (i == 0u) ? NX - 1u : i - 1u;
                const unsigned int ip = (i + 1u >= NX) ? 0u : i + 1u;
                const unsigned int site = row + i;
                const int s = spins[site];
                const int h = spins[row + im] + spins[row + ip] + spins[rowm + i] + spins[rowp + i];
                const float p = pick_p(s * h, p0, p1, p2, p3, p4);
                const unsigned int bits = fmix32(kmix ^ site);
                const float u = (float)(bits >> 8) * (1.0f / 16777216.0f);
                if (u < p) spins[site] = (signed char)(-s);
            }
        }
        return;
    }

    // ---------------- fast path: NX % W == 0, whole W-byte segments ----------------
    // All 32 lanes of a working warp stay to the end (shuffles below).
    const bool inb = (j < NY) && (i0 < NX);
    const unsigned int lane = tid & 31u;

    // Lane 2m holds the integer threshold for m mismatching neighbours:
    // accept  <=>  u < p  <=>  (bits >> 8) < ceil(p * 2^24)   (all exact)
    unsigned int Tl = 0u;
    if (lane < 10u && (lane & 1u) == 0u) {
        const float p = __ldg(p_accept + (4u - (lane >> 1)));   // m mismatches -> index 4-m
        Tl = (unsigned int)ceilf(p * 16777216.0f);
    }

    const unsigned int a  = (colour ^ j) & 1u;          // offset of first active byte
    const unsigned int jm = (j == 0u) ? NY - 1u : j - 1u;
    const unsigned int jp = (j + 1u >= NY) ? 0u : j + 1u;
    const unsigned int row = j * NX;
    const unsigned int sbase = row + i0;                 // multiple of W

    const unsigned int NWW = W / 4;
    unsigned int Cw[NWW + 2];                            // [0]: left edge, [NWW+1]: right edge
    unsigned int Uw[NWW], Dw[NWW];
#pragma unroll
    for (unsigned int k = 0; k < NWW; k++) { Cw[k + 1] = 0x01010101u; Uw[k] = 0x01010101u; Dw[k] = 0x01010101u; }
    Cw[0] = 0x01000000u;
    Cw[NWW + 1] = 0x01u;
    if (inb) {
        LOAD_SEG(Cw, 1, spins + sbase);
        LOAD_SEG(Uw, 0, spins + jm * NX + i0);
        LOAD_SEG(Dw, 0, spins + jp * NX + i0);
        const unsigned int ei = a ? ((i0 + W == NX) ? 0u : i0 + W)
                                  : ((i0 == 0u) ? NX - 1u : i0 - 1u);
        const unsigned int E = (unsigned int)(unsigned char)spins[row + ei];
        Cw[0] = E << 24;          // left neighbour of byte 0 (used when a == 0)
        Cw[NWW + 1] = E;          // right neighbour of byte W-1 (used when a == 1)
    }

    // Hash: x = kmix ^ (sbase | b), b < W; first xor-shift folded into K1a.
    const unsigned int K   = kmix ^ sbase;
    const unsigned int K1a = (K ^ (K >> 16)) ^ a;
    const unsigned int sh  = 8u * a;
    signed char* P = spins + sbase + a;

#pragma unroll
    for (unsigned int k = 0; k < NWW; k++) {
        const unsigned int C = Cw[k + 1];
        const unsigned int L = __funnelshift_l(Cw[k], C, 8);       // byte n = left neighbour
        const unsigned int R = __funnelshift_r(C, Cw[k + 2], 8);   // byte n = right neighbour
        // per byte: 2 * (number of neighbours with the opposite spin), 0..8
        const unsigned int X = ((C ^ L) & 0x02020202u) + ((C ^ R) & 0x02020202u)
                             + ((C ^ Uw[k]) & 0x02020202u) + ((C ^ Dw[k]) & 0x02020202u);
        const unsigned int Xs = X >> sh;                           // active bytes at 0 and 2
        const unsigned int Fs = (C ^ 0xFEFEFEFEu) >> sh;           // flipped spins
#pragma unroll
        for (unsigned int q = 0; q < 2u; q++) {
            unsigned int x = K1a ^ (4u * k + 2u * q);
            x *= 0x85EBCA6Bu;
            x ^= x >> 13;
            x *= 0xC2B2AE35u;
            x ^= x >> 16;
            const unsigned int kk = x >> 8;
            const unsigned int idx = (q == 0u) ? Xs : (Xs >> 16);   // low 5 bits = 2m
            const unsigned int T = __shfl_sync(0xffffffffu, Tl, (int)idx);
            if (inb && kk < T)
                P[4u * k + 2u * q] = (signed char)((q == 0u) ? Fs : (Fs >> 16));
        }
    }
}

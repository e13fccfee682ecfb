// adi3d tunable: the seed's algorithm (one thread per line, c' table filled
// by thread 0 of every block in shared memory, serial Thomas solve per line
// with the same f32 arithmetic) with these parameters:
//   UNROLL   unroll factor of the forward and back-substitution loops
//            (1 = the seed, no unrolling).
//   CARRY    0 = the seed: the forward sweep re-reads d'[q-1] and the back
//            substitution re-reads x[q+1] from u_out in global memory;
//            1 = both values are carried in a register instead (the same
//            values, so the same results).
//   STAGE_X  adi_x only, whose lines run along the fast axis so that the
//            32 threads of a block touch 32 different rows: 0 = the seed
//            (every thread streams its own line from/to global memory);
//            1 = the block stages its 32 lines through a 32 x 32 shared
//            tile per chunk of 32 elements, loaded and stored row by row
//            (coalesced), each thread solving its line from the tile.
// The launch (blocks of 32 x 1 x 1, one thread per line) is fixed by the
// task, so there is no block declaration.
// The seed's configuration: UNROLL=1 CARRY=0 STAGE_X=0.
// kevo: tune UNROLL 1 2 4 8
// kevo: tune CARRY 0 1
// kevo: tune STAGE_X 0 1

#define ADI_MAX_N 1024
// The task's fixed block width: the lines of one block, the staged tile width.
#define ADI_BLOCK 32

// Unroll pragma with a macro count.
#define ADI_PRAGMA(x) _Pragma(#x)
#define ADI_UNROLL(n) ADI_PRAGMA(unroll n)

__device__ void adi_cprime(float* cp, unsigned int n, float mu) {
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        float a = -mu, b = 1.0f + 2.0f * mu, c = -mu;
        for (unsigned int q = 1; q + 1 < n; q++) {
            float den = (q == 1) ? b : b - a * cp[q - 1];
            cp[q] = c / den;
        }
    }
    __syncthreads();
}

__device__ void adi_line(const float* u_in, float* u_out, unsigned int base,
                         unsigned int stride, unsigned int n, float mu, bool solve,
                         const float* cp) {
    if (!solve) {
        ADI_UNROLL(UNROLL)
        for (unsigned int q = 0; q < n; q++) u_out[base + q * stride] = u_in[base + q * stride];
        return;
    }
    float a = -mu, b = 1.0f + 2.0f * mu;
    float v0 = u_in[base];
    float vn = u_in[base + (n - 1) * stride];
    u_out[base] = v0;
    u_out[base + (n - 1) * stride] = vn;
#if CARRY
    float dprev = 0.0f;  // d'[q-1]; after the loop d'[n-2]
#endif
    ADI_UNROLL(UNROLL)
    for (unsigned int q = 1; q + 1 < n; q++) {
        float r = u_in[base + q * stride];
        if (q == 1) r += mu * v0;
        if (q == n - 2) r += mu * vn;
        float d;
        if (q == 1) {
            d = r / b;
        } else {
            float den = b - a * cp[q - 1];
#if CARRY
            d = (r - a * dprev) / den;
#else
            d = (r - a * u_out[base + (q - 1) * stride]) / den;
#endif
        }
        u_out[base + q * stride] = d;
#if CARRY
        dprev = d;
#endif
    }
#if CARRY
    float xnext = dprev;  // x[q+1]; x[n-2] = d'[n-2]
#endif
    ADI_UNROLL(UNROLL)
    for (unsigned int q = n - 2; q-- > 1;) {
        unsigned int idx = base + q * stride;
#if CARRY
        float x = u_out[idx] - cp[q] * xnext;
        u_out[idx] = x;
        xnext = x;
#else
        u_out[idx] = u_out[idx] - cp[q] * u_out[idx + stride];
#endif
    }
}

// Lines along x: thread (x, y) = (j, k).
extern "C" __global__ void adi_x(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float cp[ADI_MAX_N];
    adi_cprime(cp, NX, mu);
#if STAGE_X
    // Row l of the tile is element q0 + e of line j0 + l; the +1 column
    // keeps both the row-wise copies and the per-thread column walks free
    // of bank conflicts. No thread returns early: all take the barriers.
    __shared__ float tile[ADI_BLOCK][ADI_BLOCK + 1];
    unsigned int lane = threadIdx.x;
    unsigned int j0 = blockIdx.x * ADI_BLOCK;
    unsigned int k = blockIdx.y;
    unsigned int j = j0 + lane;
    bool live = j < NY && k < NZ;
    bool solve = live && j >= 1 && j + 1 < NY && k >= 1 && k + 1 < NZ;
    unsigned int nl = NY - j0 < ADI_BLOCK ? NY - j0 : ADI_BLOCK;  // lines of this block
    if (k >= NZ) nl = 0;
    unsigned int row0 = (k * NY + j0) * NX;  // line j0 + l starts at row0 + l*NX
    float a = -mu, b = 1.0f + 2.0f * mu;
    float v0 = 0.0f, vn = 0.0f;
    if (solve) {
        v0 = u_in[row0 + lane * NX];
        vn = u_in[row0 + lane * NX + NX - 1];
    }
    // Forward sweep, chunk by chunk: d' replaces the tile, then goes to u_out.
    float dprev = 0.0f;
    for (unsigned int q0 = 0; q0 < NX; q0 += ADI_BLOCK) {
        unsigned int w = NX - q0 < ADI_BLOCK ? NX - q0 : ADI_BLOCK;
        for (unsigned int l = 0; l < nl; l++)
            if (lane < w) tile[l][lane] = u_in[row0 + l * NX + q0 + lane];
        __syncthreads();
        if (solve) {
            ADI_UNROLL(UNROLL)
            for (unsigned int e = 0; e < ADI_BLOCK; e++) {
                unsigned int q = q0 + e;
                if (e < w && q >= 1 && q + 1 < NX) {
                    float r = tile[lane][e];
                    if (q == 1) r += mu * v0;
                    if (q == NX - 2) r += mu * vn;
                    float d;
                    if (q == 1) {
                        d = r / b;
                    } else {
                        float den = b - a * cp[q - 1];
                        d = (r - a * dprev) / den;
                    }
                    tile[lane][e] = d;
                    dprev = d;
                }
            }
        }
        __syncthreads();
        for (unsigned int l = 0; l < nl; l++)
            if (lane < w) u_out[row0 + l * NX + q0 + lane] = tile[l][lane];
        __syncthreads();
    }
    // Back substitution, chunks in reverse: x[q] = d'[q] - c'[q] x[q+1]
    // for 1 <= q <= NX-3 (x[NX-2] = d'[NX-2], the ends stay as copied).
    float xnext = dprev;
    for (int c = (int)((NX - 1) / ADI_BLOCK); c >= 0; c--) {
        unsigned int q0 = (unsigned int)c * ADI_BLOCK;
        unsigned int w = NX - q0 < ADI_BLOCK ? NX - q0 : ADI_BLOCK;
        for (unsigned int l = 0; l < nl; l++)
            if (lane < w) tile[l][lane] = u_out[row0 + l * NX + q0 + lane];
        __syncthreads();
        if (solve) {
            ADI_UNROLL(UNROLL)
            for (int e = ADI_BLOCK - 1; e >= 0; e--) {
                unsigned int q = q0 + (unsigned int)e;
                if ((unsigned int)e < w && q >= 1 && q + 2 < NX) {
                    float x = tile[lane][e] - cp[q] * xnext;
                    tile[lane][e] = x;
                    xnext = x;
                }
            }
        }
        __syncthreads();
        for (unsigned int l = 0; l < nl; l++)
            if (lane < w) u_out[row0 + l * NX + q0 + lane] = tile[l][lane];
        __syncthreads();
    }
#else
    unsigned int j = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int k = blockIdx.y * blockDim.y + threadIdx.y;
    if (j >= NY || k >= NZ) return;
    bool solve = j >= 1 && j + 1 < NY && k >= 1 && k + 1 < NZ;
    adi_line(u_in, u_out, (k * NY + j) * NX, 1u, NX, mu, solve, cp);
#endif
}

// Lines along y: thread (x, y) = (i, k).
extern "C" __global__ void adi_y(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float cp[ADI_MAX_N];
    adi_cprime(cp, NY, mu);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int k = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || k >= NZ) return;
    bool solve = i >= 1 && i + 1 < NX && k >= 1 && k + 1 < NZ;
    adi_line(u_in, u_out, k * NY * NX + i, NX, NY, mu, solve, cp);
}

// Lines along z: thread (x, y) = (i, j).
extern "C" __global__ void adi_z(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float cp[ADI_MAX_N];
    adi_cprime(cp, NZ, mu);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    bool solve = i >= 1 && i + 1 < NX && j >= 1 && j + 1 < NY;
    adi_line(u_in, u_out, j * NX + i, NX * NY, NZ, mu, solve, cp);
}

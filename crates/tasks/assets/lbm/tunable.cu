// lbm tunable: the seed's algorithm (one thread per cell, pull-streaming
// fused with BGK collision, moments and equilibria in loops over the nine
// directions) with the choices that decide its speed exposed:
//   BLOCK_X, BLOCK_Y  block shape (the seed's is 16 x 16).
//   WRAP    how a pull finds its periodic source cell. 0: (i - cx + NX) % NX
//           and (j - cy + NY) % NY per direction, 18 integer divisions per
//           cell (the seed); 1: the wrapped neighbours i-1, i+1, j-1, j+1
//           once per cell, each pull selects among them.
//   TABLES  where the direction tables live. 0: __constant__ memory, loaded
//           at run time (the seed); 1: compile-time constants, so the
//           unrolled loops fold the velocities and weights.
// Every configuration pulls the same values and does the same arithmetic.
// kevo: tune BLOCK_X 16 32 64 128 256
// kevo: tune BLOCK_Y 1 2 4 8 16
// kevo: tune WRAP 0 1
// kevo: tune TABLES 0 1
// kevo: require BLOCK_X * BLOCK_Y >= 64 && BLOCK_X * BLOCK_Y <= 1024
// kevo: block BLOCK_X*BLOCK_Y

__constant__ int LBM_CX[9] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
__constant__ int LBM_CY[9] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
__constant__ float LBM_W[9] = {4.0f / 9.0f,  1.0f / 9.0f,  1.0f / 9.0f,
                               1.0f / 9.0f,  1.0f / 9.0f,  1.0f / 36.0f,
                               1.0f / 36.0f, 1.0f / 36.0f, 1.0f / 36.0f};

#if TABLES
// Local constant copies: after full unrolling every index is a constant.
#define LBM_TABLES                                                                  \
    const int cx_[9] = {0, 1, 0, -1, 0, 1, -1, -1, 1};                              \
    const int cy_[9] = {0, 0, 1, 0, -1, 1, 1, -1, -1};                              \
    const float w_[9] = {4.0f / 9.0f,  1.0f / 9.0f,  1.0f / 9.0f,  1.0f / 9.0f,     \
                         1.0f / 9.0f,  1.0f / 36.0f, 1.0f / 36.0f, 1.0f / 36.0f,    \
                         1.0f / 36.0f};
#define CX(k) cx_[k]
#define CY(k) cy_[k]
#define WK(k) w_[k]
#else
#define LBM_TABLES
#define CX(k) LBM_CX[k]
#define CY(k) LBM_CY[k]
#define WK(k) LBM_W[k]
#endif

extern "C" __global__ void lbm_step(const float* f_in, float* f_out, unsigned int NX,
                                    unsigned int NY, float tau) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    LBM_TABLES
    unsigned int cells = NX * NY;
    float f[9];
#if WRAP
    // Periodic neighbours, once per cell.
    unsigned int im = (i == 0) ? NX - 1 : i - 1;
    unsigned int ip = (i == NX - 1) ? 0 : i + 1;
    unsigned int jm = (j == 0) ? NY - 1 : j - 1;
    unsigned int jp = (j == NY - 1) ? 0 : j + 1;
#endif
#pragma unroll
    for (int k = 0; k < 9; ++k) {
#if WRAP
        // The source is (i - cx, j - cy).
        unsigned int si = CX(k) > 0 ? im : (CX(k) < 0 ? ip : i);
        unsigned int sj = CY(k) > 0 ? jm : (CY(k) < 0 ? jp : j);
#else
        unsigned int si = (unsigned int)((int)i - CX(k) + (int)NX) % NX;
        unsigned int sj = (unsigned int)((int)j - CY(k) + (int)NY) % NY;
#endif
        f[k] = f_in[k * cells + sj * NX + si];
    }
    float rho = 0.0f, mx = 0.0f, my = 0.0f;
#pragma unroll
    for (int k = 0; k < 9; ++k) {
        rho += f[k];
        mx += (float)CX(k) * f[k];
        my += (float)CY(k) * f[k];
    }
    float inv_rho = 1.0f / rho;
    float u = mx * inv_rho;
    float v = my * inv_rho;
    float usq = u * u + v * v;
    float inv_tau = 1.0f / tau;
    unsigned int idx = j * NX + i;
#pragma unroll
    for (int k = 0; k < 9; ++k) {
        float cu = (float)CX(k) * u + (float)CY(k) * v;
        float feq = WK(k) * rho * (1.0f + 3.0f * cu + 4.5f * cu * cu - 1.5f * usq);
        f_out[k * cells + idx] = f[k] - inv_tau * (f[k] - feq);
    }
}

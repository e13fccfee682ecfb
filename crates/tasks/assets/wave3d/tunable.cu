// wave3d, tunable variant of the seed: one leapfrog step of the 3-D wave
// equation, one thread per cell, same arithmetic as the seed.
//   BLOCK_X, BLOCK_Y, BLOCK_Z  block shape (i fastest, then j, then k).
//   SMEM   0: seven loads of u_curr from global memory per cell, as the seed;
//          1: the block first stages its (BLOCK_Z+2) x (BLOCK_Y+2) x
//             (BLOCK_X+2) box of u_curr, halo included, in shared memory,
//             then reads the stencil from it (u_prev still from global).
// The seed is BLOCK_X=8 BLOCK_Y=8 BLOCK_Z=4 SMEM=0.
// kevo: tune BLOCK_X 8 16 32 64
// kevo: tune BLOCK_Y 1 2 4 8
// kevo: tune BLOCK_Z 1 2 4
// kevo: tune SMEM 0 1
// kevo: require BLOCK_X * BLOCK_Y * BLOCK_Z >= 64
// kevo: require BLOCK_X * BLOCK_Y * BLOCK_Z <= 1024
// kevo: block BLOCK_X*BLOCK_Y*BLOCK_Z

extern "C" __global__ void wave_step(const float* u_prev, const float* u_curr, float* u_next,
                                     unsigned int NX, unsigned int NY, unsigned int NZ,
                                     float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned int k = blockIdx.z * blockDim.z + threadIdx.z;
#if SMEM
    // Box origin: one cell before the block's first cell on every axis.
    __shared__ float box[BLOCK_Z + 2][BLOCK_Y + 2][BLOCK_X + 2];
    const int i0 = (int)(blockIdx.x * BLOCK_X) - 1;
    const int j0 = (int)(blockIdx.y * BLOCK_Y) - 1;
    const int k0 = (int)(blockIdx.z * BLOCK_Z) - 1;
    const int tid = (threadIdx.z * BLOCK_Y + threadIdx.y) * BLOCK_X + threadIdx.x;
    const int SX = BLOCK_X + 2, SY = BLOCK_Y + 2, SZ = BLOCK_Z + 2;
    for (int e = tid; e < SX * SY * SZ; e += BLOCK_X * BLOCK_Y * BLOCK_Z) {
        int bz = e / (SX * SY);
        int r = e - bz * (SX * SY);
        int by = r / SX;
        int bx = r - by * SX;
        int gi = i0 + bx, gj = j0 + by, gk = k0 + bz;
        // Cells outside the grid are never read by a computing thread.
        if (gi >= 0 && gj >= 0 && gk >= 0 && gi < (int)NX && gj < (int)NY && gk < (int)NZ)
            box[bz][by][bx] = u_curr[((unsigned int)gk * NY + (unsigned int)gj) * NX + (unsigned int)gi];
    }
    __syncthreads();
    if (i >= NX || j >= NY || k >= NZ) return;
    unsigned int idx = (k * NY + j) * NX + i;
    const int x = threadIdx.x + 1, y = threadIdx.y + 1, z = threadIdx.z + 1;
    float c = box[z][y][x];
    if (i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1) {
        u_next[idx] = c;
        return;
    }
    float xm = box[z][y][x - 1];
    float xp = box[z][y][x + 1];
    float ym = box[z][y - 1][x];
    float yp = box[z][y + 1][x];
    float zm = box[z - 1][y][x];
    float zp = box[z + 1][y][x];
    float lap = xm + xp + ym + yp + zm + zp - 6.0f * c;
    u_next[idx] = 2.0f * c - u_prev[idx] + alpha * lap;
#else
    if (i >= NX || j >= NY || k >= NZ) return;
    unsigned int idx = (k * NY + j) * NX + i;
    if (i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1) {
        u_next[idx] = u_curr[idx];
        return;
    }
    unsigned int plane = NX * NY;
    float c = u_curr[idx];
    float xm = u_curr[idx - 1];
    float xp = u_curr[idx + 1];
    float ym = u_curr[idx - NX];
    float yp = u_curr[idx + NX];
    float zm = u_curr[idx - plane];
    float zp = u_curr[idx + plane];
    float lap = xm + xp + ym + yp + zm + zp - 6.0f * c;
    u_next[idx] = 2.0f * c - u_prev[idx] + alpha * lap;
#endif
}

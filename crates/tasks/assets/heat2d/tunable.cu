// heat2d, tunable variant of the seed: one Jacobi step of the 2-D heat
// equation, one thread per cell, same arithmetic as the seed.
//   BLOCK_X, BLOCK_Y  block shape (columns x rows).
//   SMEM   0: five global loads per cell, as the seed (relies on L1/L2);
//          1: the block first stages its (BLOCK_Y+2) x (BLOCK_X+2) tile of
//             u_in, halo included, in shared memory, then reads from it.
// The seed is BLOCK_X=16 BLOCK_Y=16 SMEM=0.
// kevo: tune BLOCK_X 16 32 64 128 256
// kevo: tune BLOCK_Y 1 2 4 8 16 32
// kevo: tune SMEM 0 1
// kevo: require BLOCK_X * BLOCK_Y >= 64
// kevo: require BLOCK_X * BLOCK_Y <= 1024
// kevo: block BLOCK_X*BLOCK_Y

extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
#if SMEM
    // Tile origin (one cell up and left of the block's first cell); the
    // tile covers rows j0 .. j0 + BLOCK_Y + 1 and columns i0 .. i0 + BLOCK_X + 1.
    __shared__ float tile[BLOCK_Y + 2][BLOCK_X + 2];
    const int i0 = (int)(blockIdx.x * BLOCK_X) - 1;
    const int j0 = (int)(blockIdx.y * BLOCK_Y) - 1;
    const int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    for (int e = tid; e < (BLOCK_X + 2) * (BLOCK_Y + 2); e += BLOCK_X * BLOCK_Y) {
        int ty = e / (BLOCK_X + 2);
        int tx = e - ty * (BLOCK_X + 2);
        int gi = i0 + tx, gj = j0 + ty;
        // Cells outside the grid are never read by a computing thread.
        if (gi >= 0 && gj >= 0 && gi < (int)NX && gj < (int)NY)
            tile[ty][tx] = u_in[(unsigned int)gj * NX + (unsigned int)gi];
    }
    __syncthreads();
    if (i >= NX || j >= NY) return;
    unsigned int idx = j * NX + i;
    const int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    float c = tile[ty][tx];
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) {
        u_out[idx] = c;
        return;
    }
    float l = tile[ty][tx - 1];
    float r = tile[ty][tx + 1];
    float d = tile[ty - 1][tx];
    float u = tile[ty + 1][tx];
    u_out[idx] = c + alpha * (l + r + d + u - 4.0f * c);
#else
    if (i >= NX || j >= NY) return;
    unsigned int idx = j * NX + i;
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) {
        u_out[idx] = u_in[idx];
        return;
    }
    float c = u_in[idx];
    float l = u_in[idx - 1];
    float r = u_in[idx + 1];
    float d = u_in[idx - NX];
    float u = u_in[idx + NX];
    u_out[idx] = c + alpha * (l + r + d + u - 4.0f * c);
#endif
}

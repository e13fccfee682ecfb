// wave3d, tunable variant of the seed: one leapfrog step of the 3-D wave
// equation, one work-item per cell, same arithmetic as the seed.
//   BLOCK_X, BLOCK_Y, BLOCK_Z  work-group shape (i fastest, then j, then k).
//   SMEM   0: seven loads of u_curr from global memory per cell, as the seed;
//          1: the work-group first stages its (BLOCK_Z+2) x (BLOCK_Y+2) x
//             (BLOCK_X+2) box of u_curr, halo included, in local memory,
//             then reads the stencil from it (u_prev still from global).
// The seed is BLOCK_X=8 BLOCK_Y=8 BLOCK_Z=4 SMEM=0.
// kevo: tune BLOCK_X 8 16 32 64
// kevo: tune BLOCK_Y 1 2 4 8
// kevo: tune BLOCK_Z 1 2 4
// kevo: tune SMEM 0 1
// kevo: require BLOCK_X * BLOCK_Y * BLOCK_Z >= 64
// kevo: require BLOCK_X * BLOCK_Y * BLOCK_Z <= 1024
// kevo: block BLOCK_X*BLOCK_Y*BLOCK_Z

__kernel void wave_step(__global const float* u_prev, __global const float* u_curr,
                        __global float* u_next, uint NX, uint NY, uint NZ, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    uint k = get_global_id(2);
#if SMEM
    // Box origin: one cell before the group's first cell on every axis.
    __local float box[BLOCK_Z + 2][BLOCK_Y + 2][BLOCK_X + 2];
    const int i0 = (int)(get_group_id(0) * BLOCK_X) - 1;
    const int j0 = (int)(get_group_id(1) * BLOCK_Y) - 1;
    const int k0 = (int)(get_group_id(2) * BLOCK_Z) - 1;
    const int tid = (int)((get_local_id(2) * BLOCK_Y + get_local_id(1)) * BLOCK_X
                          + get_local_id(0));
    const int SX = BLOCK_X + 2, SY = BLOCK_Y + 2, SZ = BLOCK_Z + 2;
    for (int e = tid; e < SX * SY * SZ; e += BLOCK_X * BLOCK_Y * BLOCK_Z) {
        int bz = e / (SX * SY);
        int r = e - bz * (SX * SY);
        int by = r / SX;
        int bx = r - by * SX;
        int gi = i0 + bx, gj = j0 + by, gk = k0 + bz;
        // Cells outside the grid are never read by a computing work-item.
        if (gi >= 0 && gj >= 0 && gk >= 0 && gi < (int)NX && gj < (int)NY && gk < (int)NZ)
            box[bz][by][bx] = u_curr[((uint)gk * NY + (uint)gj) * NX + (uint)gi];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i >= NX || j >= NY || k >= NZ) return;
    uint idx = (k * NY + j) * NX + i;
    const int x = (int)get_local_id(0) + 1, y = (int)get_local_id(1) + 1,
              z = (int)get_local_id(2) + 1;
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
    uint idx = (k * NY + j) * NX + i;
    if (i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1) {
        u_next[idx] = u_curr[idx];
        return;
    }
    uint plane = NX * NY;
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

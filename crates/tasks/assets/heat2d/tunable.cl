// heat2d, tunable variant of the seed: one Jacobi step of the 2-D heat
// equation, one work-item per cell, same arithmetic as the seed.
//   BLOCK_X, BLOCK_Y  work-group shape (columns x rows).
//   SMEM   0: five global loads per cell, as the seed (relies on caches);
//          1: the work-group first stages its (BLOCK_Y+2) x (BLOCK_X+2) tile
//             of u_in, halo included, in local memory, then reads from it.
// The seed is BLOCK_X=16 BLOCK_Y=16 SMEM=0.
// kevo: tune BLOCK_X 16 32 64 128 256
// kevo: tune BLOCK_Y 1 2 4 8 16 32
// kevo: tune SMEM 0 1
// kevo: require BLOCK_X * BLOCK_Y >= 64
// kevo: require BLOCK_X * BLOCK_Y <= 1024
// kevo: block BLOCK_X*BLOCK_Y

__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
#if SMEM
    // Tile origin (one cell up and left of the group's first cell); the
    // tile covers rows j0 .. j0 + BLOCK_Y + 1 and columns i0 .. i0 + BLOCK_X + 1.
    __local float tile[BLOCK_Y + 2][BLOCK_X + 2];
    const int i0 = (int)(get_group_id(0) * BLOCK_X) - 1;
    const int j0 = (int)(get_group_id(1) * BLOCK_Y) - 1;
    const int tid = (int)(get_local_id(1) * BLOCK_X + get_local_id(0));
    for (int e = tid; e < (BLOCK_X + 2) * (BLOCK_Y + 2); e += BLOCK_X * BLOCK_Y) {
        int ty = e / (BLOCK_X + 2);
        int tx = e - ty * (BLOCK_X + 2);
        int gi = i0 + tx, gj = j0 + ty;
        // Cells outside the grid are never read by a computing work-item.
        if (gi >= 0 && gj >= 0 && gi < (int)NX && gj < (int)NY)
            tile[ty][tx] = u_in[(uint)gj * NX + (uint)gi];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i >= NX || j >= NY) return;
    uint idx = j * NX + i;
    const int tx = (int)get_local_id(0) + 1, ty = (int)get_local_id(1) + 1;
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
    uint idx = j * NX + i;
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

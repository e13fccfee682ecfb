// morton tunable: the seed's algorithm (one work-item per Morton index t, face
// cells copied, seven loads and one store with the same f32 stencil
// arithmetic) with these parameters:
//   BLOCK     work-items per work-group (1-D); 256 is the task's default.
//   INDEX     how coordinates and neighbour indices are found:
//             0 = the seed's per-bit loops (decode t, re-encode each
//                 neighbour);
//             1 = O(1) bit spreading/compaction with magic masks;
//             2 = neighbour arithmetic directly on the Morton index (masked
//                 increment/decrement of one axis's bits), faces detected
//                 from the masked index, no decode at all.
//   RESTRICT  1 = the buffers are declared restrict (on CUDA this lets the
//             compiler use the read-only data path for the gathered loads); 0 = as
//             in the seed.
// The seed's configuration: BLOCK=256 INDEX=0 RESTRICT=0.
// kevo: tune BLOCK 32 64 128 256 512 1024
// kevo: tune INDEX 0 1 2
// kevo: tune RESTRICT 0 1
// kevo: block BLOCK

#if RESTRICT
#define MORTON_RESTRICT restrict
#else
#define MORTON_RESTRICT
#endif

// Bit b of every 3-bit group: the x, y and z bits of a Morton index.
#define MASK_X 0x09249249u

#if INDEX == 0
uint morton_encode(uint x, uint y, uint z, uint logN) {
    uint m = 0;
    for (uint b = 0; b < logN; b++) {
        m |= ((x >> b) & 1u) << (3u * b);
        m |= ((y >> b) & 1u) << (3u * b + 1u);
        m |= ((z >> b) & 1u) << (3u * b + 2u);
    }
    return m;
}
#elif INDEX == 1
// Spread the 10 low bits of v to every third bit (bit b -> bit 3b).
inline uint spread3(uint v) {
    v &= 0x3FFu;
    v = (v | (v << 16)) & 0x030000FFu;
    v = (v | (v << 8)) & 0x0300F00Fu;
    v = (v | (v << 4)) & 0x030C30C3u;
    v = (v | (v << 2)) & 0x09249249u;
    return v;
}
// The inverse: gather every third bit (bit 3b -> bit b).
inline uint compact3(uint m) {
    m &= 0x09249249u;
    m = (m ^ (m >> 2)) & 0x030C30C3u;
    m = (m ^ (m >> 4)) & 0x0300F00Fu;
    m = (m ^ (m >> 8)) & 0x030000FFu;
    m = (m ^ (m >> 16)) & 0x000003FFu;
    return m;
}
inline uint morton_encode(uint x, uint y, uint z, uint logN) {
    return spread3(x) | (spread3(y) << 1) | (spread3(z) << 2);
}
#endif

__kernel void morton_stencil(__global const float* MORTON_RESTRICT u_in,
                             __global float* MORTON_RESTRICT u_out, uint N, uint logN,
                             float alpha) {
    uint t = get_global_id(0);
    if (t >= N * N * N) return;
#if INDEX == 2
    // Axis masks cut to 3*logN bits; an axis is at 0 when its bits are all
    // clear and at N-1 when they are all set.
    uint full = (logN >= 11u) ? 0xFFFFFFFFu : ((1u << (3u * logN)) - 1u);
    uint mx = MASK_X & full, my = (MASK_X << 1) & full, mz = (MASK_X << 2) & full;
    uint tx = t & mx, ty = t & my, tz = t & mz;
    if (tx == 0u || ty == 0u || tz == 0u || tx == mx || ty == my || tz == mz) {
        u_out[t] = u_in[t];
        return;
    }
    // +1 along an axis: fill the other axes' bits with ones so the carry
    // skips them; -1: borrow within the axis's bits only.
    uint oyz = t & (my | mz), oxz = t & (mx | mz), oxy = t & (mx | my);
    float c = u_in[t];
    float xm = u_in[oyz | ((tx - 1u) & mx)];
    float xp = u_in[oyz | (((t | my | mz) + 1u) & mx)];
    float ym = u_in[oxz | ((ty - 1u) & my)];
    float yp = u_in[oxz | (((t | mx | mz) + 1u) & my)];
    float zm = u_in[oxy | ((tz - 1u) & mz)];
    float zp = u_in[oxy | (((t | mx | my) + 1u) & mz)];
#else
    uint x = 0, y = 0, z = 0;
#if INDEX == 1
    x = compact3(t);
    y = compact3(t >> 1);
    z = compact3(t >> 2);
#else
    for (uint b = 0; b < logN; b++) {
        x |= ((t >> (3u * b)) & 1u) << b;
        y |= ((t >> (3u * b + 1u)) & 1u) << b;
        z |= ((t >> (3u * b + 2u)) & 1u) << b;
    }
#endif
    if (x == 0 || y == 0 || z == 0 || x == N - 1 || y == N - 1 || z == N - 1) {
        u_out[t] = u_in[t];
        return;
    }
    float c = u_in[t];
    float xm = u_in[morton_encode(x - 1, y, z, logN)];
    float xp = u_in[morton_encode(x + 1, y, z, logN)];
    float ym = u_in[morton_encode(x, y - 1, z, logN)];
    float yp = u_in[morton_encode(x, y + 1, z, logN)];
    float zm = u_in[morton_encode(x, y, z - 1, logN)];
    float zp = u_in[morton_encode(x, y, z + 1, logN)];
#endif
    u_out[t] = c + alpha * (xm + xp + ym + yp + zm + zp - 6.0f * c);
}

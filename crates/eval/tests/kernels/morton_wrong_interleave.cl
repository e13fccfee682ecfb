// morton seed with a bug: the neighbour encoder interleaves in 2-bit groups
// (a 2-D Morton code) instead of 3-bit groups, so neighbours are read from
// the wrong cells.
// morton seed: one work-item per Morton index t. It decodes (x, y, z) with a
// per-bit loop, copies face cells, re-encodes each of the six neighbours with
// another per-bit loop, and does seven loads and one store.

uint morton_encode(uint x, uint y, uint z, uint logN) {
    uint m = 0;
    for (uint b = 0; b < logN; b++) {
        m |= ((x >> b) & 1u) << (2u * b);
        m |= ((y >> b) & 1u) << (2u * b + 1u);
        m |= ((z >> b) & 1u) << (2u * b + 2u);
    }
    return m;
}

__kernel void morton_stencil(__global const float* u_in, __global float* u_out, uint N,
                             uint logN, float alpha) {
    uint t = get_global_id(0);
    if (t >= N * N * N) return;
    uint x = 0, y = 0, z = 0;
    for (uint b = 0; b < logN; b++) {
        x |= ((t >> (3u * b)) & 1u) << b;
        y |= ((t >> (3u * b + 1u)) & 1u) << b;
        z |= ((t >> (3u * b + 2u)) & 1u) << b;
    }
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
    u_out[t] = c + alpha * (xm + xp + ym + yp + zm + zp - 6.0f * c);
}

// morton with program-scope lookup tables for 8-bit spreads.
__constant uint SPREAD8[8] = {0u, 1u, 8u, 9u, 64u, 65u, 72u, 73u};

uint spread(uint v, uint logN) {
    uint m = 0;
    for (uint b = 0; b < logN; b += 3)
        m |= SPREAD8[(v >> b) & 7u] << (3u * b);
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
    float s = u_in[spread(x - 1, logN) | (spread(y, logN) << 1) | (spread(z, logN) << 2)] +
              u_in[spread(x + 1, logN) | (spread(y, logN) << 1) | (spread(z, logN) << 2)] +
              u_in[spread(x, logN) | (spread(y - 1, logN) << 1) | (spread(z, logN) << 2)] +
              u_in[spread(x, logN) | (spread(y + 1, logN) << 1) | (spread(z, logN) << 2)] +
              u_in[spread(x, logN) | (spread(y, logN) << 1) | (spread(z - 1, logN) << 2)] +
              u_in[spread(x, logN) | (spread(y, logN) << 1) | (spread(z + 1, logN) << 2)];
    u_out[t] = c + alpha * (s - 6.0f * c);
}

// morton seed: one thread per Morton index t. It decodes (x, y, z) with a
// per-bit loop, copies face cells, re-encodes each of the six neighbours with
// another per-bit loop, and does seven loads and one store.

__device__ unsigned int morton_encode(unsigned int x, unsigned int y, unsigned int z,
                                      unsigned int logN) {
    unsigned int m = 0;
    for (unsigned int b = 0; b < logN; b++) {
        m |= ((x >> b) & 1u) << (3u * b);
        m |= ((y >> b) & 1u) << (3u * b + 1u);
        m |= ((z >> b) & 1u) << (3u * b + 2u);
    }
    return m;
}

extern "C" __global__ void morton_stencil(const float* u_in, float* u_out, unsigned int N,
                                          unsigned int logN, float alpha) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N * N * N) return;
    unsigned int x = 0, y = 0, z = 0;
    for (unsigned int b = 0; b < logN; b++) {
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

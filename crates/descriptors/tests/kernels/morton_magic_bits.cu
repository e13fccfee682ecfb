// morton with constant-time bit spreading (magic-number masks) instead of
// per-bit loops: O(1) per index rather than O(log N).
__device__ __forceinline__ unsigned int spread3(unsigned int v) {
    v &= 0x3ffu;
    v = (v | (v << 16)) & 0x030000FFu;
    v = (v | (v << 8)) & 0x0300F00Fu;
    v = (v | (v << 4)) & 0x030C30C3u;
    v = (v | (v << 2)) & 0x09249249u;
    return v;
}

__device__ __forceinline__ unsigned int compact3(unsigned int v) {
    v &= 0x09249249u;
    v = (v | (v >> 2)) & 0x030C30C3u;
    v = (v | (v >> 4)) & 0x0300F00Fu;
    v = (v | (v >> 8)) & 0x030000FFu;
    v = (v | (v >> 16)) & 0x3ffu;
    return v;
}

__device__ __forceinline__ unsigned int encode(unsigned int x, unsigned int y, unsigned int z) {
    return spread3(x) | (spread3(y) << 1) | (spread3(z) << 2);
}

extern "C" __global__ void morton_stencil(const float* u_in, float* u_out, unsigned int N,
                                          unsigned int logN, float alpha) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N * N * N) return;
    unsigned int x = compact3(t), y = compact3(t >> 1), z = compact3(t >> 2);
    if (x == 0 || y == 0 || z == 0 || x == N - 1 || y == N - 1 || z == N - 1) {
        u_out[t] = u_in[t];
        return;
    }
    float c = u_in[t];
    float s = u_in[encode(x - 1, y, z)] + u_in[encode(x + 1, y, z)] +
              u_in[encode(x, y - 1, z)] + u_in[encode(x, y + 1, z)] +
              u_in[encode(x, y, z - 1)] + u_in[encode(x, y, z + 1)];
    u_out[t] = c + alpha * (s - 6.0f * c);
}

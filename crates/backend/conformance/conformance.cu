// Kernels of the backend conformance suite (CUDA C++).
// Every backend runs the same checks against its own dialect's copy of these.

extern "C" __global__ void probe_index(unsigned int* out, unsigned int nx, unsigned int ny,
                                       unsigned int nz) {
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    unsigned int lin = (z * ny + y) * nx + x;
    out[lin] = lin ^ 0xA5A5A5A5u;
}

extern "C" __global__ void args_probe(unsigned int* out_u, float* out_f, const float* in,
                                      unsigned int u, int i, float f, unsigned int n) {
    unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    if (gid == 0) {
        out_u[0] = u;
        out_u[1] = (unsigned int)i;
        out_u[2] = __float_as_uint(f);
    }
    if (gid < n) out_f[gid] = in[gid] * f + (float)i;
}

extern "C" __global__ void increment(unsigned int* data, unsigned int n) {
    unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    if (gid < n) data[gid] += 1u;
}

extern "C" __global__ void busy(float* data, unsigned int n, unsigned int iters) {
    unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    if (gid >= n) return;
    float acc = data[gid];
    for (unsigned int k = 0; k < iters; ++k) acc = acc * 0.999f + 0.001f;
    data[gid] = acc;
}

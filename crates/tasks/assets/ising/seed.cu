// ising seed: one thread per site over the whole lattice; wrong-colour
// threads return at once, the others do five byte loads, a table lookup,
// the hash and a conditional in-place store.
__device__ __forceinline__ unsigned int fmix32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

extern "C" __global__ void ising_step(signed char* spins, const float* p_accept,
                                      unsigned int NX, unsigned int NY,
                                      unsigned int step_idx, unsigned int seed) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    if (((i + j) & 1u) != (step_idx & 1u)) return;
    unsigned int im = (i == 0) ? NX - 1 : i - 1;
    unsigned int ip = (i == NX - 1) ? 0 : i + 1;
    unsigned int jm = (j == 0) ? NY - 1 : j - 1;
    unsigned int jp = (j == NY - 1) ? 0 : j + 1;
    unsigned int site = j * NX + i;
    int s = spins[site];
    int h = spins[j * NX + im] + spins[j * NX + ip] + spins[jm * NX + i] + spins[jp * NX + i];
    float p = p_accept[(s * h + 4) / 2];
    unsigned int key = seed + step_idx * 0x9E3779B9u;
    unsigned int bits = fmix32(fmix32(key) ^ site);
    float u = (float)(bits >> 8) * (1.0f / 16777216.0f);
    if (u < p) spins[site] = (signed char)(-s);
}

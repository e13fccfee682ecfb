// ising tunable: the seed's algorithm (one checkerboard sub-pass per launch,
// five byte loads, a table lookup, the Murmur3 hash and a conditional
// in-place store per site of the launch's colour) with the choices that
// decide its speed exposed:
//   BLOCK_X, BLOCK_Y  block shape (the seed's is 16 x 16).
//   COMPACT  which thread updates which site. 0: thread (i, j) updates site
//            (i, j) if it has the launch's colour, so every warp has half its
//            lanes idle (the seed); 1: the block's sites of the launch's
//            colour (half of them) go to its first half of threads, packed,
//            and the other half of the block returns at once, so the working
//            warps run full. The block still covers exactly its own sites.
// kevo: tune BLOCK_X 16 32 64 128 256 512
// kevo: tune BLOCK_Y 1 2 4 8 16
// kevo: tune COMPACT 0 1
// kevo: require BLOCK_X * BLOCK_Y >= 64 && BLOCK_X * BLOCK_Y <= 1024
// kevo: block BLOCK_X*BLOCK_Y

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
#if COMPACT
    // The block's tile is blockDim.x x blockDim.y sites starting at an even
    // column (every BLOCK_X is even); each tile row holds
    // per_row = blockDim.x / 2 sites of each colour. Thread t of the block
    // takes the (t % per_row)-th site of the launch's colour in tile row
    // t / per_row.
    unsigned int t = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned int per_row = blockDim.x >> 1;
    if (t >= per_row * blockDim.y) return;
    unsigned int j = blockIdx.y * blockDim.y + t / per_row;
    // (i + j) & 1 == step_idx & 1 with the tile's first column even.
    unsigned int i = blockIdx.x * blockDim.x + 2u * (t % per_row) + ((j + step_idx) & 1u);
    // NX is even, so a tile pair's colour site is inside the lattice
    // exactly when the pair is.
    if (i >= NX || j >= NY) return;
#else
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    if (((i + j) & 1u) != (step_idx & 1u)) return;
#endif
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

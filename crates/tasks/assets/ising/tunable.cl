// ising tunable: the seed's algorithm (one checkerboard sub-pass per launch,
// five byte loads, a table lookup, the Murmur3 hash and a conditional
// in-place store per site of the launch's colour) with the choices that
// decide its speed exposed:
//   BLOCK_X, BLOCK_Y  work-group shape (the seed's is 16 x 16).
//   COMPACT  which work-item updates which site. 0: work-item (i, j) updates
//            site (i, j) if it has the launch's colour, so every SIMD group
//            has half its lanes idle (the seed); 1: the group's sites of the
//            launch's colour (half of them) go to its first half of
//            work-items, packed, and the other half returns at once, so the
//            working SIMD groups run full. The work-group still covers
//            exactly its own sites.
// kevo: tune BLOCK_X 16 32 64 128 256 512
// kevo: tune BLOCK_Y 1 2 4 8 16
// kevo: tune COMPACT 0 1
// kevo: require BLOCK_X * BLOCK_Y >= 64 && BLOCK_X * BLOCK_Y <= 1024
// kevo: block BLOCK_X*BLOCK_Y

inline uint fmix32(uint x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

__kernel void ising_step(__global char* spins, __global const float* p_accept, uint NX,
                         uint NY, uint step_idx, uint seed) {
#if COMPACT
    // The work-group's tile is get_local_size(0) x get_local_size(1) sites
    // starting at an even column (every BLOCK_X is even); each tile row holds
    // per_row = get_local_size(0) / 2 sites of each colour. Work-item t of
    // the group takes the (t % per_row)-th site of the launch's colour in
    // tile row t / per_row.
    uint t = get_local_id(1) * get_local_size(0) + get_local_id(0);
    uint per_row = get_local_size(0) >> 1;
    if (t >= per_row * get_local_size(1)) return;
    uint j = get_group_id(1) * get_local_size(1) + t / per_row;
    // (i + j) & 1 == step_idx & 1 with the tile's first column even.
    uint i = get_group_id(0) * get_local_size(0) + 2u * (t % per_row) + ((j + step_idx) & 1u);
    // NX is even, so a tile pair's colour site is inside the lattice
    // exactly when the pair is.
    if (i >= NX || j >= NY) return;
#else
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    if (((i + j) & 1u) != (step_idx & 1u)) return;
#endif
    uint im = (i == 0) ? NX - 1 : i - 1;
    uint ip = (i == NX - 1) ? 0 : i + 1;
    uint jm = (j == 0) ? NY - 1 : j - 1;
    uint jp = (j == NY - 1) ? 0 : j + 1;
    uint site = j * NX + i;
    int s = spins[site];
    int h = spins[j * NX + im] + spins[j * NX + ip] + spins[jm * NX + i] + spins[jp * NX + i];
    float p = p_accept[(s * h + 4) / 2];
    uint key = seed + step_idx * 0x9E3779B9u;
    uint bits = fmix32(fmix32(key) ^ site);
    float u = (float)(bits >> 8) * (1.0f / 16777216.0f);
    if (u < p) spins[site] = (char)(-s);
}

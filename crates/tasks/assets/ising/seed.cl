// ising seed: one work-item per site over the whole lattice; wrong-colour
// work-items return at once, the others do five byte loads, a table lookup,
// the hash and a conditional in-place store.
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
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    if (((i + j) & 1u) != (step_idx & 1u)) return;
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

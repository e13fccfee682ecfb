// lj tunable: the seed's algorithm (cell list cleared and built with atomics
// every step, then one thread per particle scans the 27 neighbouring cells
// with periodic wrap and the same per-pair arithmetic), with the parameters
// that decide its speed exposed. Only lj_step carries real work; the clear
// and build launches keep the seed's blocks (64 and 128).
//   STEP_BLOCK  threads per block of lj_step (the seed: 128).
//   UNROLL      unroll factor of the loop over the occupants of a cell in
//               lj_step; 1 leaves the loop as written (the seed).
//   RESTRICT    1: lj_step's pointers are declared __restrict__ (pos_in,
//               cell_count, cell_list are read-only and never alias the
//               outputs), so the compiler may use the read-only data path
//               and reorder loads; 0: plain pointers (the seed).
// Seed configuration: STEP_BLOCK=128 UNROLL=1 RESTRICT=0.
// kevo: tune STEP_BLOCK 32 64 128 256 512
// kevo: tune UNROLL 1 2 4
// kevo: tune RESTRICT 0 1
// kevo: require STEP_BLOCK <= 1024
// kevo: block lj_clear_cells 64
// kevo: block lj_build_cells 128
// kevo: block lj_step STEP_BLOCK

#define KEVO_STR(x) #x
#if UNROLL > 1
#define KEVO_UNROLL(n) _Pragma(KEVO_STR(unroll n))
#else
#define KEVO_UNROLL(n)
#endif

#if RESTRICT
#define KEVO_RESTRICT __restrict__
#else
#define KEVO_RESTRICT
#endif

extern "C" __global__ void lj_clear_cells(unsigned int* cell_count, unsigned int M3) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= M3) return;
    atomicExch(&cell_count[c], 0u);
}

__device__ int lj_cell_of(float r, float L, float cell, int m) {
    float w = r - L * floorf(r / L);
    int c = (int)(w / cell);
    return min(max(c, 0), m - 1);
}

extern "C" __global__ void lj_build_cells(const float4* pos, unsigned int* cell_count,
                                          unsigned int* cell_list, unsigned int N,
                                          unsigned int M, float L, unsigned int MAX_PER_CELL) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float4 r = pos[i];
    float cell = L / (float)M;
    int cx = lj_cell_of(r.x, L, cell, (int)M);
    int cy = lj_cell_of(r.y, L, cell, (int)M);
    int cz = lj_cell_of(r.z, L, cell, (int)M);
    unsigned int c = ((unsigned int)cz * M + (unsigned int)cy) * M + (unsigned int)cx;
    unsigned int slot = atomicAdd(&cell_count[c], 1u);
    if (slot < MAX_PER_CELL) cell_list[c * MAX_PER_CELL + slot] = i;
}

extern "C" __global__ void __launch_bounds__(STEP_BLOCK)
lj_step(const float4* KEVO_RESTRICT pos_in, float4* KEVO_RESTRICT pos_out,
        const float4* KEVO_RESTRICT vel_in, float4* KEVO_RESTRICT vel_out,
        const unsigned int* KEVO_RESTRICT cell_count,
        const unsigned int* KEVO_RESTRICT cell_list, unsigned int N, unsigned int M, float L,
        float rcut2, float dt, unsigned int MAX_PER_CELL) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float4 ri = pos_in[i];
    float cell = L / (float)M;
    int m = (int)M;
    int cx = lj_cell_of(ri.x, L, cell, m);
    int cy = lj_cell_of(ri.y, L, cell, m);
    int cz = lj_cell_of(ri.z, L, cell, m);
    float fx = 0.0f, fy = 0.0f, fz = 0.0f;
    for (int dz = -1; dz <= 1; dz++) {
        for (int dy = -1; dy <= 1; dy++) {
            for (int dx = -1; dx <= 1; dx++) {
                int nx = (cx + dx + m) % m;
                int ny = (cy + dy + m) % m;
                int nz = (cz + dz + m) % m;
                unsigned int c = ((unsigned int)nz * M + (unsigned int)ny) * M + (unsigned int)nx;
                unsigned int count = min(cell_count[c], MAX_PER_CELL);
                KEVO_UNROLL(UNROLL)
                for (unsigned int s = 0; s < count; s++) {
                    unsigned int j = cell_list[c * MAX_PER_CELL + s];
                    if (j == i) continue;
                    float4 rj = pos_in[j];
                    float ddx = rj.x - ri.x, ddy = rj.y - ri.y, ddz = rj.z - ri.z;
                    ddx -= L * roundf(ddx / L);
                    ddy -= L * roundf(ddy / L);
                    ddz -= L * roundf(ddz / L);
                    float r2 = ddx * ddx + ddy * ddy + ddz * ddz;
                    if (r2 < rcut2 && r2 > 1e-12f) {
                        float inv2 = 1.0f / r2;
                        float inv6 = inv2 * inv2 * inv2;
                        float s6 = -24.0f * (2.0f * inv6 * inv6 - inv6) * inv2;
                        fx += s6 * ddx;
                        fy += s6 * ddy;
                        fz += s6 * ddz;
                    }
                }
            }
        }
    }
    float4 v = vel_in[i];
    v.x += fx * dt;
    v.y += fy * dt;
    v.z += fz * dt;
    v.w = 0.0f;
    pos_out[i] = make_float4(ri.x + v.x * dt, ri.y + v.y * dt, ri.z + v.z * dt, 0.0f);
    vel_out[i] = v;
}

// lj tunable: the seed's algorithm (cell list cleared and built with atomics
// every step, then one work-item per particle scans the 27 neighbouring cells
// with periodic wrap and the same per-pair arithmetic), with the parameters
// that decide its speed exposed. Only lj_step carries real work; the clear
// and build launches keep the seed's work-groups (64 and 128).
//   STEP_BLOCK  work-items per work-group of lj_step (the seed: 128).
//   UNROLL      unroll factor of the loop over the occupants of a cell in
//               lj_step; 1 leaves the loop as written (the seed).
//   RESTRICT    1: lj_step's pointers are declared restrict (pos_in,
//               cell_count, cell_list are read-only and never alias the
//               outputs), so the compiler may reorder and cache loads;
//               0: plain pointers (the seed).
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
#define KEVO_RESTRICT restrict
#else
#define KEVO_RESTRICT
#endif

__kernel void lj_clear_cells(volatile __global uint* cell_count, uint M3) {
    uint c = get_global_id(0);
    if (c >= M3) return;
    atomic_xchg(&cell_count[c], 0u);
}

__kernel void lj_build_cells(__global const float4* pos, volatile __global uint* cell_count,
                             __global uint* cell_list, uint N, uint M, float L,
                             uint MAX_PER_CELL) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float3 r = pos[i].xyz;
    float3 w = r - L * floor(r / L);
    float cell = L / (float)M;
    int cx = clamp((int)(w.x / cell), 0, (int)M - 1);
    int cy = clamp((int)(w.y / cell), 0, (int)M - 1);
    int cz = clamp((int)(w.z / cell), 0, (int)M - 1);
    uint c = ((uint)cz * M + (uint)cy) * M + (uint)cx;
    uint slot = atomic_inc(&cell_count[c]);
    if (slot < MAX_PER_CELL) cell_list[c * MAX_PER_CELL + slot] = i;
}

__kernel __attribute__((reqd_work_group_size(STEP_BLOCK, 1, 1)))
void lj_step(__global const float4* KEVO_RESTRICT pos_in,
             __global float4* KEVO_RESTRICT pos_out,
             __global const float4* KEVO_RESTRICT vel_in,
             __global float4* KEVO_RESTRICT vel_out,
             __global const uint* KEVO_RESTRICT cell_count,
             __global const uint* KEVO_RESTRICT cell_list, uint N, uint M, float L,
             float rcut2, float dt, uint MAX_PER_CELL) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float3 ri = pos_in[i].xyz;
    float3 w = ri - L * floor(ri / L);
    float cell = L / (float)M;
    int m = (int)M;
    int cx = clamp((int)(w.x / cell), 0, m - 1);
    int cy = clamp((int)(w.y / cell), 0, m - 1);
    int cz = clamp((int)(w.z / cell), 0, m - 1);
    float3 f = (float3)(0.0f);
    for (int dz = -1; dz <= 1; dz++) {
        for (int dy = -1; dy <= 1; dy++) {
            for (int dx = -1; dx <= 1; dx++) {
                int nx = (cx + dx + m) % m;
                int ny = (cy + dy + m) % m;
                int nz = (cz + dz + m) % m;
                uint c = ((uint)nz * M + (uint)ny) * M + (uint)nx;
                uint count = min(cell_count[c], MAX_PER_CELL);
                KEVO_UNROLL(UNROLL)
                for (uint s = 0; s < count; s++) {
                    uint j = cell_list[c * MAX_PER_CELL + s];
                    if (j == i) continue;
                    float3 d = pos_in[j].xyz - ri;
                    d -= L * round(d / L);
                    float r2 = dot(d, d);
                    if (r2 < rcut2 && r2 > 1e-12f) {
                        float inv2 = 1.0f / r2;
                        float inv6 = inv2 * inv2 * inv2;
                        f += (-24.0f * (2.0f * inv6 * inv6 - inv6) * inv2) * d;
                    }
                }
            }
        }
    }
    float3 v = vel_in[i].xyz + f * dt;
    float3 r = ri + v * dt;
    pos_out[i] = (float4)(r, 0.0f);
    vel_out[i] = (float4)(v, 0.0f);
}

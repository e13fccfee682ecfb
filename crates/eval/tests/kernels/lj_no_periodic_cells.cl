// lj seed with a bug: neighbour cells past the box edge are skipped
// instead of wrapped, so pairs across the periodic boundary are missed.
// lj seed: clear and build the cell list with atomics, then one work-item per
// particle scans the 27 neighbouring cells (periodic wrap) reading every
// neighbour's position from global memory. No local memory, no pair sharing.

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

__kernel void lj_step(__global const float4* pos_in, __global float4* pos_out,
                      __global const float4* vel_in, __global float4* vel_out,
                      __global const uint* cell_count, __global const uint* cell_list,
                      uint N, uint M, float L, float rcut2, float dt, uint MAX_PER_CELL) {
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
                int nx = cx + dx;
                int ny = cy + dy;
                int nz = cz + dz;
                if (nx < 0 || ny < 0 || nz < 0 || nx >= m || ny >= m || nz >= m) continue;
                uint c = ((uint)nz * M + (uint)ny) * M + (uint)nx;
                uint count = min(cell_count[c], MAX_PER_CELL);
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

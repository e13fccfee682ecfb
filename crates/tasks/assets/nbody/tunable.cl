// nbody tunable: the seed's algorithm (one work-item per body, all-pairs
// softened gravity summed in f32 in j order, symplectic Euler), with the
// parameters that decide its speed exposed.
//   BLOCK      work-items per work-group (the seed: 128).
//   TILE_SMEM  0: every work-item reads pos_in[j] and mass[j] from global
//              memory (the seed); 1: the work-group stages BLOCK bodies at a
//              time (xyz and mass) through local memory and every work-item
//              sums over the tile, in the same j order as the seed.
//   UNROLL     unroll factor of the j loop; 1 leaves the loop as written (no
//              unroll directive, as the seed).
// Seed configuration: BLOCK=128 TILE_SMEM=0 UNROLL=1.
// kevo: tune BLOCK 32 64 128 256 512 1024
// kevo: tune TILE_SMEM 0 1
// kevo: tune UNROLL 1 2 4 8
// kevo: require BLOCK <= 1024
// kevo: block BLOCK

#define KEVO_STR(x) #x
#if UNROLL > 1
#define KEVO_UNROLL(n) _Pragma(KEVO_STR(unroll n))
#else
#define KEVO_UNROLL(n)
#endif

__kernel __attribute__((reqd_work_group_size(BLOCK, 1, 1)))
void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                __global const float4* vel_in, __global float4* vel_out,
                __global const float* mass, uint N, float dt, float eps, float G) {
    uint i = get_global_id(0);
    float3 acc = (float3)(0.0f, 0.0f, 0.0f);
    float eps2 = eps * eps;
#if TILE_SMEM
    // Every work-item of the group helps load the tiles, so work-items past
    // N stay until the end of the force loop.
    __local float4 tile[BLOCK];
    uint lid = get_local_id(0);
    bool live = i < N;
    float3 ri = live ? pos_in[i].xyz : (float3)(0.0f, 0.0f, 0.0f);
    for (uint base = 0; base < N; base += BLOCK) {
        uint j = base + lid;
        float4 pj = (float4)(0.0f, 0.0f, 0.0f, 0.0f);
        if (j < N) pj = (float4)(pos_in[j].xyz, mass[j]);
        barrier(CLK_LOCAL_MEM_FENCE);  // the previous tile has been read
        tile[lid] = pj;
        barrier(CLK_LOCAL_MEM_FENCE);
        // The last tile may be short; work-items past N only help with loading.
        uint n_tile = live ? min((uint)BLOCK, N - base) : 0u;
        KEVO_UNROLL(UNROLL)
        for (uint k = 0; k < n_tile; ++k) {
            float4 q = tile[k];
            float3 d = q.xyz - ri;
            float r2 = d.x * d.x + d.y * d.y + d.z * d.z + eps2;
            float inv_r3 = rsqrt(r2 * r2 * r2);
            acc += (G * q.w * inv_r3) * d;
        }
    }
    if (!live) return;
#else
    if (i >= N) return;
    float3 ri = pos_in[i].xyz;
    KEVO_UNROLL(UNROLL)
    for (uint j = 0; j < N; ++j) {
        float3 d = pos_in[j].xyz - ri;
        float r2 = d.x * d.x + d.y * d.y + d.z * d.z + eps2;
        float inv_r3 = rsqrt(r2 * r2 * r2);
        acc += (G * mass[j] * inv_r3) * d;
    }
#endif
    float3 v = vel_in[i].xyz + acc * dt;
    float3 r = ri + v * dt;
    vel_out[i] = (float4)(v, 0.0f);
    pos_out[i] = (float4)(r, 0.0f);
}

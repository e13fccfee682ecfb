// nbody with __local tiles; the barrier hides behind a macro and a
// commented-out atomic must not count.
#define TILE 128
#define SYNC barrier(CLK_LOCAL_MEM_FENCE)
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    __local float4 tile[TILE];
    __local float tile_mass[TILE];
    uint i = get_global_id(0);
    uint l = get_local_id(0);
    float4 pi = i < N ? pos_in[i] : (float4)(0.0f);
    float3 acc = (float3)(0.0f);
    float eps2 = eps * eps;
    for (uint base = 0; base < N; base += TILE) {
        uint j = base + l;
        tile[l] = j < N ? pos_in[j] : (float4)(0.0f);
        tile_mass[l] = j < N ? mass[j] : 0.0f;
        SYNC;
        for (uint k = 0; k < TILE; ++k) {
            float3 d = tile[k].xyz - pi.xyz;
            float r2 = dot(d, d) + eps2;
            float s = G * tile_mass[k] * rsqrt(r2 * r2 * r2);
            acc += s * d; // atomic_add(&total, s) was slower
        }
        SYNC;
    }
    if (i >= N) return;
    float4 v = vel_in[i];
    v.xyz += acc * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = (float4)(pi.xyz + v.xyz * dt, 0.0f);
}

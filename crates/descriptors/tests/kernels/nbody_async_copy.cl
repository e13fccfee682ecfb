// nbody whose tiles arrive by async_work_group_copy.
#define TILE 128
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    __local float4 tile[TILE];
    __local float tile_mass[TILE];
    uint i = get_global_id(0);
    float4 pi = i < N ? pos_in[i] : (float4)(0.0f);
    float3 acc = (float3)(0.0f);
    float eps2 = eps * eps;
    for (uint base = 0; base < N; base += TILE) {
        uint count = min((uint)TILE, N - base);
        event_t e[2];
        e[0] = async_work_group_copy(tile, pos_in + base, count, 0);
        e[1] = async_work_group_copy(tile_mass, mass + base, count, 0);
        wait_group_events(2, e);
        for (uint k = 0; k < count; ++k) {
            float3 d = tile[k].xyz - pi.xyz;
            float r2 = dot(d, d) + eps2;
            acc += G * tile_mass[k] * rsqrt(r2 * r2 * r2) * d;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i >= N) return;
    float4 v = vel_in[i];
    v.xyz += acc * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = (float4)(pi.xyz + v.xyz * dt, 0.0f);
}

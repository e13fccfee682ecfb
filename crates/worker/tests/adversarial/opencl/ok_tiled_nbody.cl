// Honest: nbody with the positions staged through local memory in tiles of
// the work-group size, so the force sum runs in another order than the
// seed's. The audited tolerance must accept it.
// kevo: block 64
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    __local float4 tile[64];
    uint i = get_global_id(0);
    uint lid = get_local_id(0);
    float3 ri = i < N ? pos_in[i].xyz : (float3)(0.0f, 0.0f, 0.0f);
    float3 acc = (float3)(0.0f, 0.0f, 0.0f);
    float eps2 = eps * eps;
    for (uint base = 0; base < N; base += 64) {
        uint j = base + lid;
        tile[lid] = j < N ? (float4)(pos_in[j].xyz, mass[j]) : (float4)(0.0f, 0.0f, 0.0f, 0.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint k = 0; k < 64 && base + k < N; ++k) {
            float3 d = tile[k].xyz - ri;
            float r2 = d.x * d.x + d.y * d.y + d.z * d.z + eps2;
            float inv_r3 = rsqrt(r2 * r2 * r2);
            acc += (G * tile[k].w * inv_r3) * d;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i >= N) return;
    float3 v = vel_in[i].xyz + acc * dt;
    float3 r = ri + v * dt;
    vel_out[i] = (float4)(v, 0.0f);
    pos_out[i] = (float4)(r, 0.0f);
}

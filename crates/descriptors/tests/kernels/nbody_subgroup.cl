// nbody broadcasting bodies across a sub-group (needs cl_khr_subgroups,
// which PoCL on a CPU lacks).
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    uint i = get_global_id(0);
    uint lane = get_sub_group_local_id();
    uint width = get_sub_group_size();
    float4 pi = i < N ? pos_in[i] : (float4)(0.0f);
    float3 acc = (float3)(0.0f);
    float eps2 = eps * eps;
    for (uint base = 0; base < N; base += width) {
        uint j = base + lane;
        float4 mine = j < N ? pos_in[j] : (float4)(0.0f);
        float m = j < N ? mass[j] : 0.0f;
        for (uint k = 0; k < width; ++k) {
            float4 pj = sub_group_broadcast(mine, k);
            float mk = sub_group_broadcast(m, k);
            float3 d = pj.xyz - pi.xyz;
            float r2 = dot(d, d) + eps2;
            acc += G * mk * rsqrt(r2 * r2 * r2) * d;
        }
    }
    if (i >= N) return;
    float4 v = vel_in[i];
    v.xyz += acc * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = (float4)(pi.xyz + v.xyz * dt, 0.0f);
}

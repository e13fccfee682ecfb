// nbody computing 1/r^3 from sqrt and a division instead of rsqrt.
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float4 pi = pos_in[i];
    float3 acc = (float3)(0.0f);
    float eps2 = eps * eps;
    for (uint j = 0; j < N; ++j) {
        float3 d = pos_in[j].xyz - pi.xyz;
        float r2 = dot(d, d) + eps2;
        float r = sqrt(r2);
        acc += G * mass[j] / (r2 * r) * d;
    }
    float4 v = vel_in[i];
    v.xyz += acc * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = (float4)(pi.xyz + v.xyz * dt, 0.0f);
}

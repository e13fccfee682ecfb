// nbody reference: all pairs from global memory, run by kevo on the device
// for the expected positions and velocities.
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float3 ri = pos_in[i].xyz;
    float3 acc = (float3)(0.0f, 0.0f, 0.0f);
    float eps2 = eps * eps;
    for (uint j = 0; j < N; ++j) {
        float3 d = pos_in[j].xyz - ri;
        float r2 = d.x * d.x + d.y * d.y + d.z * d.z + eps2;
        float inv_r3 = rsqrt(r2 * r2 * r2);
        acc += (G * mass[j] * inv_r3) * d;
    }
    float3 v = vel_in[i].xyz + acc * dt;
    float3 r = ri + v * dt;
    vel_out[i] = (float4)(v, 0.0f);
    pos_out[i] = (float4)(r, 0.0f);
}

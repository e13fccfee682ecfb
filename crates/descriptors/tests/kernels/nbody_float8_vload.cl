// nbody reading two bodies per step with vload8 (and mass with vload2);
// the odd body is finished by a remainder loop.
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float3 ri = pos_in[i].xyz;
    float3 acc = (float3)(0.0f);
    float eps2 = eps * eps;
    __global const float* p = (__global const float*)pos_in;
    uint j = 0;
    for (; j + 1 < N; j += 2) {
        float8 pj = vload8(j / 2, p);
        float2 mj = vload2(j / 2, mass);
        float3 d0 = pj.s012 - ri;
        float3 d1 = pj.s456 - ri;
        float r0 = dot(d0, d0) + eps2;
        float r1 = dot(d1, d1) + eps2;
        acc += (G * mj.s0 * rsqrt(r0 * r0 * r0)) * d0;
        acc += (G * mj.s1 * rsqrt(r1 * r1 * r1)) * d1;
    }
    for (; j < N; ++j) {
        float3 d = pos_in[j].xyz - ri;
        float r2 = dot(d, d) + eps2;
        acc += (G * mass[j] * rsqrt(r2 * r2 * r2)) * d;
    }
    float3 v = vel_in[i].xyz + acc * dt;
    vel_out[i] = (float4)(v, 0.0f);
    pos_out[i] = (float4)(ri + v * dt, 0.0f);
}

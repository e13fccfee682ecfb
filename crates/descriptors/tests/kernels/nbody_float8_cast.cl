// nbody reading two bodies per step through a cast to a float8 pointer;
// the odd body is finished by a branch.
__kernel void nbody_step(__global const float4* pos_in, __global float4* pos_out,
                         __global const float4* vel_in, __global float4* vel_out,
                         __global const float* mass, uint N, float dt, float eps, float G) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float3 ri = pos_in[i].xyz;
    float3 acc = (float3)(0.0f);
    float eps2 = eps * eps;
    __global const float8* p8 = (__global const float8*)pos_in;
    uint half_n = N / 2;
    for (uint k = 0; k < half_n; ++k) {
        float8 pj = p8[k];
        float3 d0 = pj.s012 - ri;
        float3 d1 = pj.s456 - ri;
        float r0 = dot(d0, d0) + eps2;
        float r1 = dot(d1, d1) + eps2;
        acc += (G * mass[2 * k] * rsqrt(r0 * r0 * r0)) * d0;
        acc += (G * mass[2 * k + 1] * rsqrt(r1 * r1 * r1)) * d1;
    }
    if (N % 2) {
        float3 d = pos_in[N - 1].xyz - ri;
        float r2 = dot(d, d) + eps2;
        acc += (G * mass[N - 1] * rsqrt(r2 * r2 * r2)) * d;
    }
    float3 v = vel_in[i].xyz + acc * dt;
    vel_out[i] = (float4)(v, 0.0f);
    pos_out[i] = (float4)(ri + v * dt, 0.0f);
}

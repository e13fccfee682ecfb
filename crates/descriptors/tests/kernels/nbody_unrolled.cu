// nbody unrolled by two over the bodies, the odd one finished by a
// remainder loop; mass read two at a time through a float2 pointer.
extern "C" __global__ void nbody_step(const float4* pos_in, float4* pos_out,
                                      const float4* vel_in, float4* vel_out,
                                      const float* mass, unsigned int N, float dt, float eps,
                                      float G) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float4 pi = pos_in[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    float eps2 = eps * eps;
    const float2* m2 = reinterpret_cast<const float2*>(mass);
    unsigned int j = 0;
    for (; j + 1 < N; j += 2) {
        float2 m = m2[j / 2];
        float4 p0 = pos_in[j], p1 = pos_in[j + 1];
        float dx0 = p0.x - pi.x, dy0 = p0.y - pi.y, dz0 = p0.z - pi.z;
        float dx1 = p1.x - pi.x, dy1 = p1.y - pi.y, dz1 = p1.z - pi.z;
        float r0 = dx0 * dx0 + dy0 * dy0 + dz0 * dz0 + eps2;
        float r1 = dx1 * dx1 + dy1 * dy1 + dz1 * dz1 + eps2;
        float s0 = G * m.x * rsqrtf(r0 * r0 * r0), s1 = G * m.y * rsqrtf(r1 * r1 * r1);
        ax += s0 * dx0 + s1 * dx1;
        ay += s0 * dy0 + s1 * dy1;
        az += s0 * dz0 + s1 * dz1;
    }
    for (; j < N; ++j) {
        float4 pj = pos_in[j];
        float dx = pj.x - pi.x, dy = pj.y - pi.y, dz = pj.z - pi.z;
        float r2 = dx * dx + dy * dy + dz * dz + eps2;
        float s = G * mass[j] * rsqrtf(r2 * r2 * r2);
        ax += s * dx;
        ay += s * dy;
        az += s * dz;
    }
    float4 v = vel_in[i];
    v.x += ax * dt;
    v.y += ay * dt;
    v.z += az * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, 0.0f);
}

// nbody reference: all pairs from global memory, run by kevo on the device
// for the expected positions and velocities.
extern "C" __global__ void nbody_step(const float4* pos_in, float4* pos_out,
                                      const float4* vel_in, float4* vel_out,
                                      const float* mass, unsigned int N, float dt, float eps,
                                      float G) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float4 pi = pos_in[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    float eps2 = eps * eps;
    for (unsigned int j = 0; j < N; ++j) {
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

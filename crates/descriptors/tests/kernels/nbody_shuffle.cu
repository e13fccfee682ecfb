// nbody sharing bodies through warp shuffles instead of shared memory:
// each lane loads one body, the warp broadcasts it to every lane.
extern "C" __global__ void nbody_step(const float4* pos_in, float4* pos_out,
                                      const float4* vel_in, float4* vel_out,
                                      const float* mass, unsigned int N, float dt, float eps,
                                      float G) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int lane = threadIdx.x & 31u;
    float4 pi = i < N ? pos_in[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    float eps2 = eps * eps;
    for (unsigned int base = 0; base < N; base += 32) {
        unsigned int j = base + lane;
        float4 mine = j < N ? pos_in[j] : make_float4(0.f, 0.f, 0.f, 0.f);
        float m = j < N ? mass[j] : 0.0f;
        for (int k = 0; k < 32; ++k) {
            float px = __shfl_sync(0xffffffffu, mine.x, k);
            float py = __shfl_sync(0xffffffffu, mine.y, k);
            float pz = __shfl_sync(0xffffffffu, mine.z, k);
            float mk = __shfl_sync(0xffffffffu, m, k);
            float dx = px - pi.x, dy = py - pi.y, dz = pz - pi.z;
            float r2 = dx * dx + dy * dy + dz * dz + eps2;
            float s = G * mk * rsqrtf(r2 * r2 * r2);
            ax += s * dx;
            ay += s * dy;
            az += s * dz;
        }
    }
    if (i >= N) return;
    float4 v = vel_in[i];
    v.x += ax * dt;
    v.y += ay * dt;
    v.z += az * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, 0.0f);
}

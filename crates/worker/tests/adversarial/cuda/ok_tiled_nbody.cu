// Honest: nbody with the positions staged through shared memory in tiles of
// the block size, so the force sum runs in another order than the seed's.
// The audited tolerance must accept it.
// kevo: block 64
extern "C" __global__ void nbody_step(const float4* pos_in, float4* pos_out,
                                      const float4* vel_in, float4* vel_out,
                                      const float* mass, unsigned int N, float dt, float eps,
                                      float G) {
    __shared__ float4 tile[64];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 pi = i < N ? pos_in[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    float eps2 = eps * eps;
    for (unsigned int base = 0; base < N; base += 64) {
        unsigned int j = base + threadIdx.x;
        float4 pj = j < N ? pos_in[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        tile[threadIdx.x] = make_float4(pj.x, pj.y, pj.z, j < N ? mass[j] : 0.0f);
        __syncthreads();
        for (unsigned int k = 0; k < 64 && base + k < N; ++k) {
            float dx = tile[k].x - pi.x, dy = tile[k].y - pi.y, dz = tile[k].z - pi.z;
            float r2 = dx * dx + dy * dy + dz * dz + eps2;
            float s = G * tile[k].w * rsqrtf(r2 * r2 * r2);
            ax += s * dx;
            ay += s * dy;
            az += s * dz;
        }
        __syncthreads();
    }
    if (i >= N) return;
    float4 v = vel_in[i];
    v.x += ax * dt;
    v.y += ay * dt;
    v.z += az * dt;
    vel_out[i] = make_float4(v.x, v.y, v.z, 0.0f);
    pos_out[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, 0.0f);
}

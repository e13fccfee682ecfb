// nbody: shared-memory tiles plus register blocking, two bodies per
// thread whose accelerations stay in registers.
#define TILE 128
#define PER_THREAD 2
extern "C" __global__ void nbody_step(const float4* pos_in, float4* pos_out,
                                      const float4* vel_in, float4* vel_out,
                                      const float* mass, unsigned int N, float dt, float eps,
                                      float G) {
    __shared__ float4 tile[TILE];
    __shared__ float tile_mass[TILE];
    float4 pi[PER_THREAD];
    float3 acc[PER_THREAD];
    unsigned int first = (blockIdx.x * blockDim.x + threadIdx.x) * PER_THREAD;
    for (int r = 0; r < PER_THREAD; ++r) {
        unsigned int i = first + r;
        pi[r] = i < N ? pos_in[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        acc[r] = make_float3(0.f, 0.f, 0.f);
    }
    float eps2 = eps * eps;
    for (unsigned int base = 0; base < N; base += TILE) {
        unsigned int j = base + threadIdx.x;
        tile[threadIdx.x] = j < N ? pos_in[j] : make_float4(0.f, 0.f, 0.f, 0.f);
        tile_mass[threadIdx.x] = j < N ? mass[j] : 0.0f;
        __syncthreads();
        for (unsigned int k = 0; k < TILE; ++k) {
            float4 pj = tile[k];
            for (int r = 0; r < PER_THREAD; ++r) {
                float dx = pj.x - pi[r].x, dy = pj.y - pi[r].y, dz = pj.z - pi[r].z;
                float r2 = dx * dx + dy * dy + dz * dz + eps2;
                float s = G * tile_mass[k] * rsqrtf(r2 * r2 * r2);
                acc[r].x += s * dx;
                acc[r].y += s * dy;
                acc[r].z += s * dz;
            }
        }
        __syncthreads();
    }
    for (int r = 0; r < PER_THREAD; ++r) {
        unsigned int i = first + r;
        if (i >= N) return;
        float4 v = vel_in[i];
        v.x += acc[r].x * dt;
        v.y += acc[r].y * dt;
        v.z += acc[r].z * dt;
        v.w = 0.0f;
        vel_out[i] = v;
        pos_out[i] = make_float4(pi[r].x + v.x * dt, pi[r].y + v.y * dt, pi[r].z + v.z * dt, 0.0f);
    }
}

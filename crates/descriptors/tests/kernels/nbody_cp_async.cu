// nbody whose tiles arrive by cp.async (inline PTX), double-buffered.
#define TILE 128
__device__ __forceinline__ void copy_async16(void* shared_dst, const void* global_src) {
    unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(shared_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src));
}

extern "C" __global__ void nbody_step(const float4* pos_in, float4* pos_out,
                                      const float4* vel_in, float4* vel_out,
                                      const float* mass, unsigned int N, float dt, float eps,
                                      float G) {
    __shared__ float4 tile[2][TILE];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 pi = i < N ? pos_in[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    float eps2 = eps * eps;
    unsigned int tiles = (N + TILE - 1) / TILE;
    if (threadIdx.x < N) copy_async16(&tile[0][threadIdx.x], &pos_in[threadIdx.x]);
    asm volatile("cp.async.commit_group;\n" ::);
    for (unsigned int t = 0; t < tiles; ++t) {
        unsigned int next = (t + 1) * TILE + threadIdx.x;
        if (t + 1 < tiles && next < N) copy_async16(&tile[(t + 1) & 1][threadIdx.x], &pos_in[next]);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads();
        unsigned int count = min(TILE, N - t * TILE);
        for (unsigned int k = 0; k < count; ++k) {
            float4 pj = tile[t & 1][k];
            float dx = pj.x - pi.x, dy = pj.y - pi.y, dz = pj.z - pi.z;
            float r2 = dx * dx + dy * dy + dz * dz + eps2;
            float s = G * mass[t * TILE + k] * rsqrtf(r2 * r2 * r2);
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
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, 0.0f);
}

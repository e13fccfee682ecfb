// nbody tunable: the seed's algorithm (one thread per body, all-pairs
// softened gravity summed in f32 in j order, symplectic Euler), with the
// parameters that decide its speed exposed.
//   BLOCK      threads per block (the seed: 128).
//   TILE_SMEM  0: every thread reads pos_in[j] and mass[j] from global memory
//              (the seed); 1: the block stages BLOCK bodies at a time (xyz and
//              mass) through shared memory and every thread sums over the
//              tile, in the same j order as the seed.
//   UNROLL     unroll factor of the j loop; 1 leaves the loop as written (no
//              unroll directive, as the seed).
// Seed configuration: BLOCK=128 TILE_SMEM=0 UNROLL=1.
// kevo: tune BLOCK 32 64 128 256 512 1024
// kevo: tune TILE_SMEM 0 1
// kevo: tune UNROLL 1 2 4 8
// kevo: require BLOCK <= 1024
// kevo: block BLOCK

#define KEVO_STR(x) #x
#if UNROLL > 1
#define KEVO_UNROLL(n) _Pragma(KEVO_STR(unroll n))
#else
#define KEVO_UNROLL(n)
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
nbody_step(const float4* pos_in, float4* pos_out, const float4* vel_in, float4* vel_out,
           const float* mass, unsigned int N, float dt, float eps, float G) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    float eps2 = eps * eps;
#if TILE_SMEM
    // Every thread of the block helps load the tiles, so threads past N stay
    // until the end of the force loop.
    __shared__ float4 tile[BLOCK];
    bool live = i < N;
    float4 pi = live ? pos_in[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (unsigned int base = 0; base < N; base += BLOCK) {
        unsigned int j = base + threadIdx.x;
        float4 pj = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (j < N) {
            pj = pos_in[j];
            pj.w = mass[j];
        }
        __syncthreads();  // the previous tile has been read by everyone
        tile[threadIdx.x] = pj;
        __syncthreads();
        // The last tile may be short; threads past N only help with loading.
        unsigned int n_tile = live ? min((unsigned int)BLOCK, N - base) : 0u;
        KEVO_UNROLL(UNROLL)
        for (unsigned int k = 0; k < n_tile; ++k) {
            float4 q = tile[k];
            float dx = q.x - pi.x, dy = q.y - pi.y, dz = q.z - pi.z;
            float r2 = dx * dx + dy * dy + dz * dz + eps2;
            float s = G * q.w * rsqrtf(r2 * r2 * r2);
            ax += s * dx;
            ay += s * dy;
            az += s * dz;
        }
    }
    if (!live) return;
#else
    if (i >= N) return;
    float4 pi = pos_in[i];
    KEVO_UNROLL(UNROLL)
    for (unsigned int j = 0; j < N; ++j) {
        float4 pj = pos_in[j];
        float dx = pj.x - pi.x, dy = pj.y - pi.y, dz = pj.z - pi.z;
        float r2 = dx * dx + dy * dy + dz * dz + eps2;
        float s = G * mass[j] * rsqrtf(r2 * r2 * r2);
        ax += s * dx;
        ay += s * dy;
        az += s * dz;
    }
#endif
    float4 v = vel_in[i];
    v.x += ax * dt;
    v.y += ay * dt;
    v.z += az * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, 0.0f);
}

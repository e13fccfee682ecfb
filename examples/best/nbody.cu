// kevo configuration: BLOCK=128 UNR=4
// kevo tuned this kernel: 4 of its 4 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   BLOCK=128 UNR=4  score 0.0185; re-measured median 0.0185 (0.0185-0.0185)
//   BLOCK=64 UNR=4  score 0.0178; re-measured median 0.0178 (0.0178-0.0178)
//   BLOCK=128 UNR=2  score 0.0165; re-measured median 0.0165 (0.0164-0.0165)
//   BLOCK=64 UNR=2  score 0.0158
#define BLOCK 128
#define UNR 4
#line 1
// tuned: BLOCK = 128 (of 64 128)
// tuned: UNR = 4 (of 2 4)
// kevo: block 128

#define NB_CHUNK 2048
#define NB_PAD 16   // >= 4 * UNR

__device__ __forceinline__ void nb_int(const float4 q, float x, float y, float z, float eps2,
                                       float& ax, float& ay, float& az) {
    const float dx = q.x - x;
    const float dy = q.y - y;
    const float dz = q.z - z;
    const float r2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2)));
    const float inv = rsqrtf(r2);
    const float inv2 = inv * inv;
    const float t = q.w * inv;          // q.w = G * m_j
    const float s = t * inv2;
    ax = fmaf(s, dx, ax);
    ay = fmaf(s, dy, ay);
    az = fmaf(s, dz, az);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
nbody_step(const float4* __restrict__ pos_in, float4* __restrict__ pos_out,
           const float4* __restrict__ vel_in, float4* __restrict__ vel_out,
           const float* __restrict__ mass, unsigned int N, float dt, float eps, float G) {
    __shared__ float4 sp[NB_CHUNK + NB_PAD];

    const unsigned int tid = threadIdx.x;
    const unsigned int lane = tid & 31u;
    const unsigned int i = blockIdx.x * (unsigned int)BLOCK + tid;
    const bool active = i < N;
    const unsigned int sub = lane & 3u;
    const unsigned int gbase = blockIdx.x * (unsigned int)BLOCK + (tid & ~3u);  // my quad's bodies
    const float eps2 = eps * eps;

    float px[4], py[4], pz[4];
    float ax[4], ay[4], az[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) {
        const unsigned int bi = gbase + (unsigned int)b;
        float4 p = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (bi < N) p = __ldg(pos_in + bi);
        px[b] = p.x;
        py[b] = p.y;
        pz[b] = p.z;
        ax[b] = 0.0f;
        ay[b] = 0.0f;
        az[b] = 0.0f;
    }

    for (unsigned int base = 0; base < N; base += NB_CHUNK) {
        const unsigned int rem = N - base;
        const unsigned int cnt = rem < (unsigned int)NB_CHUNK ? rem : (unsigned int)NB_CHUNK;
        const unsigned int cntp = (cnt + 4u * UNR - 1u) / (4u * UNR) * (4u * UNR);

        __syncthreads();  // previous chunk fully consumed
        for (unsigned int k0 = tid; k0 < cntp; k0 += 8u * BLOCK) {
            float4 p[8];
            float mm[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const unsigned int k = k0 + (unsigned int)u * BLOCK;
                p[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                mm[u] = 0.0f;
                if (k < cnt) {
                    p[u] = __ldg(pos_in + base + k);
                    mm[u] = __ldg(mass + base + k);
                }
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const unsigned int k = k0 + (unsigned int)u * BLOCK;
                if (k < cntp) sp[k] = make_float4(p[u].x, p[u].y, p[u].z, G * mm[u]);  // zero-mass pad
            }
        }
        __syncthreads();

        for (unsigned int k = sub; k < cntp; k += 4u * UNR) {
#pragma unroll
            for (int u = 0; u < UNR; ++u) {
                const float4 q = sp[k + 4u * (unsigned int)u];
#pragma unroll
                for (int b = 0; b < 4; ++b)
                    nb_int(q, px[b], py[b], pz[b], eps2, ax[b], ay[b], az[b]);
            }
        }
    }

    // reduce-scatter over the quad: lane `sub` ends with the total of body gbase + sub (= i)
    const bool hi2 = (lane & 2u) != 0u;
    float kx[2], ky[2], kz[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
        const float sx = hi2 ? ax[t] : ax[2 + t];
        const float sy = hi2 ? ay[t] : ay[2 + t];
        const float sz = hi2 ? az[t] : az[2 + t];
        const float rx = __shfl_xor_sync(0xffffffffu, sx, 2);
        const float ry = __shfl_xor_sync(0xffffffffu, sy, 2);
        const float rz = __shfl_xor_sync(0xffffffffu, sz, 2);
        kx[t] = (hi2 ? ax[2 + t] : ax[t]) + rx;
        ky[t] = (hi2 ? ay[2 + t] : ay[t]) + ry;
        kz[t] = (hi2 ? az[2 + t] : az[t]) + rz;
    }
    const bool hi1 = (lane & 1u) != 0u;
    const float sx = hi1 ? kx[0] : kx[1];
    const float sy = hi1 ? ky[0] : ky[1];
    const float sz = hi1 ? kz[0] : kz[1];
    const float rx = __shfl_xor_sync(0xffffffffu, sx, 1);
    const float ry = __shfl_xor_sync(0xffffffffu, sy, 1);
    const float rz = __shfl_xor_sync(0xffffffffu, sz, 1);
    const float fx = (hi1 ? kx[1] : kx[0]) + rx;
    const float fy = (hi1 ? ky[1] : ky[0]) + ry;
    const float fz = (hi1 ? kz[1] : kz[0]) + rz;

    if (!active) return;
    const float4 pi = __ldg(pos_in + i);
    float4 v = __ldg(vel_in + i);
    v.x += fx * dt;
    v.y += fy * dt;
    v.z += fz * dt;
    v.w = 0.0f;
    vel_out[i] = v;
    pos_out[i] = make_float4(pi.x + v.x * dt, pi.y + v.y * dt, pi.z + v.z * dt, 0.0f);
}

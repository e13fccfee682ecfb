// kevo configuration: BLOCK=64 GB=8 MODE=0
// kevo tuned this kernel: 8 of its 8 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   BLOCK=64 GB=8 MODE=0  score 0.0200; re-measured median 0.0200 (0.0199-0.0200)
//   BLOCK=64 GB=4 MODE=0  score 0.0189; re-measured median 0.0189 (0.0188-0.0189)
//   BLOCK=32 GB=8 MODE=0  score 0.0187; re-measured median 0.0187 (0.0186-0.0187)
//   BLOCK=32 GB=4 MODE=0  score 0.0174
//   BLOCK=64 GB=4 MODE=1  score 0.0141
//   BLOCK=64 GB=8 MODE=1  score 0.0135
//   BLOCK=32 GB=4 MODE=1  score 0.0122
//   BLOCK=32 GB=8 MODE=1  score 0.0122
#define BLOCK 64
#define GB 8
#define MODE 0
#line 1
// tuned: BLOCK = 64 (of 32 64)
// tuned: GB = 8 (of 4 8)
// tuned: MODE = 0 (of 0 1)
// kevo: block 64

#define CHUNK 2048u
#define JSTEP 16u
#define UJ (16 / GB)
#define LU 16

#if MODE == 1
#define PADW (-1.0e30f)
#else
#define PADW 0.0f
#endif

__device__ __forceinline__ float lg2_approx(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned int umin_u(unsigned int a, unsigned int b) { return a < b ? a : b; }

extern "C" __global__ void __launch_bounds__(BLOCK)
nbody_step(const float4* __restrict__ pos_in, float4* __restrict__ pos_out,
           const float4* __restrict__ vel_in, float4* __restrict__ vel_out,
           const float* __restrict__ mass, unsigned int N, float dt, float eps,
           float G)
{
    __shared__ float4 sh[CHUNK];

    if (N == 0u) return;   // uniform over the whole grid

    const unsigned int tid = threadIdx.x;
    const unsigned int i = blockIdx.x * (unsigned int)BLOCK + tid;
    const unsigned int q = tid & (unsigned int)(GB - 1);   // lane within group
    const unsigned int g = i - q;                           // first body of the group
    const unsigned int last = N - 1u;
    const bool valid = (i < N);
    const float eps2 = eps * eps;

    // Own body state for the final update (loaded early, latency hidden).
    float4 pme = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4 vme = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (valid) {
        pme = __ldg(&pos_in[i]);
        vme = __ldg(&vel_in[i]);
    }

    float px[GB], py[GB], pz[GB];
    float ax[GB], ay[GB], az[GB];
#pragma unroll
    for (int b = 0; b < GB; ++b) {
        const unsigned int idx = umin_u(g + (unsigned int)b, last);
        const float4 p = __ldg(&pos_in[idx]);
        px[b] = p.x; py[b] = p.y; pz[b] = p.z;
        ax[b] = 0.0f; ay[b] = 0.0f; az[b] = 0.0f;
    }

    for (unsigned int base = 0u; base < N; base += CHUNK) {
        const unsigned int cnt = umin_u(N - base, CHUNK);
        const unsigned int cntPad = (cnt + JSTEP - 1u) & ~(JSTEP - 1u);   // <= CHUNK

        if (base != 0u) __syncthreads();   // previous chunk fully consumed

        // Fill the chunk: LU independent loads in flight per thread.
        for (unsigned int k0 = tid; k0 < cntPad; k0 += (unsigned int)BLOCK * LU) {
            float4 v[LU];
            float mv[LU];
#pragma unroll
            for (int u = 0; u < LU; ++u) {
                const unsigned int k = k0 + (unsigned int)u * (unsigned int)BLOCK;
                float4 p = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                float m = 0.0f;
                if (k < cnt) {
                    p = __ldg(&pos_in[base + k]);
                    m = __ldg(&mass[base + k]);
                }
                v[u] = p;
                mv[u] = m;
            }
#pragma unroll
            for (int u = 0; u < LU; ++u) {
                const unsigned int k = k0 + (unsigned int)u * (unsigned int)BLOCK;
                if (k < cntPad) {
                    float w = PADW;
                    if (k < cnt) {
#if MODE == 1
                        w = lg2_approx(G * mv[u]);
#else
                        w = G * mv[u];
#endif
                    }
                    sh[k] = make_float4(v[u].x, v[u].y, v[u].z, w);
                }
            }
        }
        __syncthreads();

        // Lane q handles j = q, q+GB, q+2GB, ... of the chunk, for all GB bodies.
        const float4* sp = sh + q;
        float4 cur[UJ];
#pragma unroll
        for (int u = 0; u < UJ; ++u) cur[u] = sp[GB * u];

        for (unsigned int jj = 0u; jj < cntPad; jj += JSTEP) {
            const unsigned int jn = (jj + JSTEP < cntPad) ? (jj + JSTEP) : jj;
            float4 nxt[UJ];
#pragma unroll
            for (int u = 0; u < UJ; ++u) nxt[u] = sp[jn + GB * u];

#pragma unroll
            for (int u = 0; u < UJ; ++u) {
#pragma unroll
                for (int b = 0; b < GB; ++b) {
                    const float dx = cur[u].x - px[b];
                    const float dy = cur[u].y - py[b];
                    const float dz = cur[u].z - pz[b];
                    const float r2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2)));
#if MODE == 1
                    const float s = ex2_approx(fmaf(lg2_approx(r2), -1.5f, cur[u].w));
#else
                    const float inv = rsqrtf(r2);
                    const float s = (cur[u].w * inv) * (inv * inv);
#endif
                    ax[b] = fmaf(s, dx, ax[b]);
                    ay[b] = fmaf(s, dy, ay[b]);
                    az[b] = fmaf(s, dz, az[b]);
                }
            }
#pragma unroll
            for (int u = 0; u < UJ; ++u) cur[u] = nxt[u];
        }
    }

    // Transpose-reduce inside each group of GB lanes: lane q ends with body g+q.
    const unsigned int FULL = 0xffffffffu;
#pragma unroll
    for (int m = GB / 2; m >= 1; m >>= 1) {
        const bool upper = (q & (unsigned int)m) != 0u;
#pragma unroll
        for (int k = 0; k < m; ++k) {
            const float kx = upper ? ax[k + m] : ax[k];
            const float sx = upper ? ax[k] : ax[k + m];
            const float ky = upper ? ay[k + m] : ay[k];
            const float sy = upper ? ay[k] : ay[k + m];
            const float kz = upper ? az[k + m] : az[k];
            const float sz = upper ? az[k] : az[k + m];
            ax[k] = kx + __shfl_xor_sync(FULL, sx, m);
            ay[k] = ky + __shfl_xor_sync(FULL, sy, m);
            az[k] = kz + __shfl_xor_sync(FULL, sz, m);
        }
    }

    if (valid) {
        float4 v = vme;
        v.x = fmaf(ax[0], dt, v.x);
        v.y = fmaf(ay[0], dt, v.y);
        v.z = fmaf(az[0], dt, v.z);
        v.w = 0.0f;
        vel_out[i] = v;
        pos_out[i] = make_float4(fmaf(v.x, dt, pme.x), fmaf(v.y, dt, pme.y),
                                 fmaf(v.z, dt, pme.z), 0.0f);
    }
}

// fft3d tunable: the seed's algorithm (one block of N threads per line, load
// at the bit-reversed position into shared memory, log2(N) radix-2
// decimation-in-time stages, natural-order store) with these parameters:
//   RADIX    radix-2 stages fused per barrier: 2 = the seed (one stage per
//            barrier, N/2 threads busy); 4 or 8 = N/4 or N/8 threads each
//            keep 4 or 8 elements in registers and run 2 or 3 consecutive
//            radix-2 stages on them (the same butterflies, in the same
//            order per element) before writing back: fewer barriers and
//            shared-memory round trips.
//   TWIDDLE  0 = cosf/sinf on the fly in every butterfly (the seed);
//            1 = a table of the N/2 twiddles of length N in shared memory,
//            filled once per block with the same formula (the angle of
//            k/m equals that of k*(N/m)/N exactly, so the values match).
//   PAD      shared-memory padding against bank conflicts: 0 = none (the
//            seed); P = one spare float2 after every P elements.
// The launch (blocks of exactly N threads, one per line) is fixed by the
// task, so there is no block declaration.
// The seed's configuration: RADIX=2 TWIDDLE=0 PAD=0.
// kevo: tune RADIX 2 4 8
// kevo: tune TWIDDLE 0 1
// kevo: tune PAD 0 8 16 32

#define FFT_MAX_N 1024

#if RADIX == 2
#define RLOG 1
#elif RADIX == 4
#define RLOG 2
#else
#define RLOG 3
#endif

#if PAD > 0
#define PIDX(i) ((i) + (i) / PAD)
#define BUF_LEN (FFT_MAX_N + FFT_MAX_N / PAD)
#else
#define PIDX(i) (i)
#define BUF_LEN FFT_MAX_N
#endif

// exp(-2 pi i k / m), m a power of two <= N, k < m / 2.
__device__ __forceinline__ float2 twiddle(unsigned int k, unsigned int m, unsigned int N,
                                          const float2* tw) {
#if TWIDDLE
    return tw[k * (N / m)];
#else
    float ang = -6.283185307179586f * (float)k / (float)m;
    return make_float2(cosf(ang), sinf(ang));
#endif
}

__device__ void fft_line(const float2* in_data, float2* out_data, unsigned int base,
                         unsigned int stride, unsigned int N, float2* buf, float2* tw) {
    unsigned int p = threadIdx.x;
    unsigned int logn = 0;
    while ((1u << logn) < N) logn++;
    unsigned int rev = 0;
    for (unsigned int b = 0; b < logn; b++) rev |= ((p >> b) & 1u) << (logn - 1u - b);
#if TWIDDLE
    // Twiddles of length N: tw[j] = exp(-2 pi i j / N), j < N/2.
    if (p < N / 2) {
        float ang = -6.283185307179586f * (float)p / (float)N;
        tw[p] = make_float2(cosf(ang), sinf(ang));
    }
#endif
    buf[PIDX(rev)] = in_data[base + p * stride];
    __syncthreads();
    // Stages s .. s+L-1 (half-sizes h .. h * 2^(L-1)) per pass; the last
    // pass may fuse fewer stages when RLOG does not divide log2(N).
    for (unsigned int s = 0; s < logn;) {
        unsigned int L = logn - s < RLOG ? logn - s : RLOG;
        unsigned int h = 1u << s;
        unsigned int cnt = 1u << L;  // elements per thread this pass
        if (p < (N >> L)) {
            unsigned int k0 = p & (h - 1u);
            unsigned int b0 = (p >> s) * (h << L) + k0;
            float2 v[RADIX];
#pragma unroll
            for (unsigned int j = 0; j < RADIX; j++)
                if (j < cnt) v[j] = buf[PIDX(b0 + j * h)];
#pragma unroll
            for (unsigned int l = 0; l < RLOG; l++) {
                if (l < L) {
                    unsigned int hs = h << l;
                    unsigned int m = hs << 1;
#pragma unroll
                    for (unsigned int j = 0; j < RADIX; j++) {
                        if ((j & (1u << l)) == 0u && j + (1u << l) < cnt) {
                            // Element b0 + j*h sits at k within its m-block.
                            unsigned int k = k0 + (j & ((1u << l) - 1u)) * h;
                            float2 w = twiddle(k, m, N, tw);
                            float c = w.x, sn = w.y;
                            float2 a = v[j];
                            float2 b = v[j + (1u << l)];
                            float2 t = make_float2(b.x * c - b.y * sn, b.x * sn + b.y * c);
                            v[j] = make_float2(a.x + t.x, a.y + t.y);
                            v[j + (1u << l)] = make_float2(a.x - t.x, a.y - t.y);
                        }
                    }
                }
            }
#pragma unroll
            for (unsigned int j = 0; j < RADIX; j++)
                if (j < cnt) buf[PIDX(b0 + j * h)] = v[j];
        }
        __syncthreads();
        s += L;
    }
    out_data[base + p * stride] = buf[PIDX(p)];
}

// Line g = blockIdx.x: k = g / N, j = g % N; the line runs along i.
extern "C" __global__ void fft3d_x(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 buf[BUF_LEN];
    __shared__ float2 tw[FFT_MAX_N / 2];
    unsigned int g = blockIdx.x;
    fft_line(in_data, out_data, (g / N) * N * N + (g % N) * N, 1u, N, buf, tw);
}

// Line g: k = g / N, i = g % N; the line runs along j (stride N).
extern "C" __global__ void fft3d_y(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 buf[BUF_LEN];
    __shared__ float2 tw[FFT_MAX_N / 2];
    unsigned int g = blockIdx.x;
    fft_line(in_data, out_data, (g / N) * N * N + (g % N), N, N, buf, tw);
}

// Line g: j = g / N, i = g % N; the line runs along k (stride N*N).
extern "C" __global__ void fft3d_z(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 buf[BUF_LEN];
    __shared__ float2 tw[FFT_MAX_N / 2];
    unsigned int g = blockIdx.x;
    fft_line(in_data, out_data, (g / N) * N + (g % N), N * N, N, buf, tw);
}

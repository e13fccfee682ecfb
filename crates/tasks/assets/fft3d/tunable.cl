// fft3d tunable: the seed's algorithm (one work-group of N work-items per
// line, load at the bit-reversed position into local memory, log2(N) radix-2
// decimation-in-time stages, natural-order store) with these parameters:
//   RADIX    radix-2 stages fused per barrier: 2 = the seed (one stage per
//            barrier, N/2 work-items busy); 4 or 8 = N/4 or N/8 work-items
//            each keep 4 or 8 elements in registers and run 2 or 3 consecutive
//            radix-2 stages on them (the same butterflies, in the same
//            order per element) before writing back: fewer barriers and
//            local-memory round trips.
//   TWIDDLE  0 = cos/sin on the fly in every butterfly (the seed);
//            1 = a table of the N/2 twiddles of length N in local memory,
//            filled once per work-group with the same formula (the angle of
//            k/m equals that of k*(N/m)/N exactly, so the values match).
//   PAD      local-memory padding against bank conflicts: 0 = none (the
//            seed); P = one spare float2 after every P elements.
// The launch (work-groups of exactly N work-items, one per line) is fixed by
// the task, so there is no block declaration.
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
float2 twiddle(uint k, uint m, uint N, __local const float2* tw) {
#if TWIDDLE
    return tw[k * (N / m)];
#else
    float ang = -6.283185307179586f * (float)k / (float)m;
    return (float2)(cos(ang), sin(ang));
#endif
}

void fft_line(__global const float2* in_data, __global float2* out_data, uint base,
              uint stride, uint N, __local float2* buf, __local float2* tw) {
    uint p = get_local_id(0);
    uint logn = 0;
    while ((1u << logn) < N) logn++;
    uint rev = 0;
    for (uint b = 0; b < logn; b++) rev |= ((p >> b) & 1u) << (logn - 1u - b);
#if TWIDDLE
    // Twiddles of length N: tw[j] = exp(-2 pi i j / N), j < N/2.
    if (p < N / 2) {
        float ang = -6.283185307179586f * (float)p / (float)N;
        tw[p] = (float2)(cos(ang), sin(ang));
    }
#endif
    buf[PIDX(rev)] = in_data[base + p * stride];
    barrier(CLK_LOCAL_MEM_FENCE);
    // Stages s .. s+L-1 (half-sizes h .. h * 2^(L-1)) per pass; the last
    // pass may fuse fewer stages when RLOG does not divide log2(N).
    for (uint s = 0; s < logn;) {
        uint L = logn - s < RLOG ? logn - s : RLOG;
        uint h = 1u << s;
        uint cnt = 1u << L;  // elements per work-item this pass
        if (p < (N >> L)) {
            uint k0 = p & (h - 1u);
            uint b0 = (p >> s) * (h << L) + k0;
            float2 v[RADIX];
#pragma unroll
            for (uint j = 0; j < RADIX; j++)
                if (j < cnt) v[j] = buf[PIDX(b0 + j * h)];
#pragma unroll
            for (uint l = 0; l < RLOG; l++) {
                if (l < L) {
                    uint hs = h << l;
                    uint m = hs << 1;
#pragma unroll
                    for (uint j = 0; j < RADIX; j++) {
                        if ((j & (1u << l)) == 0u && j + (1u << l) < cnt) {
                            // Element b0 + j*h sits at k within its m-block.
                            uint k = k0 + (j & ((1u << l) - 1u)) * h;
                            float2 w = twiddle(k, m, N, tw);
                            float c = w.x, sn = w.y;
                            float2 a = v[j];
                            float2 b = v[j + (1u << l)];
                            float2 t = (float2)(b.x * c - b.y * sn, b.x * sn + b.y * c);
                            v[j] = a + t;
                            v[j + (1u << l)] = a - t;
                        }
                    }
                }
            }
#pragma unroll
            for (uint j = 0; j < RADIX; j++)
                if (j < cnt) buf[PIDX(b0 + j * h)] = v[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        s += L;
    }
    out_data[base + p * stride] = buf[PIDX(p)];
}

// Line g = get_group_id(0): k = g / N, j = g % N; the line runs along i.
__kernel void fft3d_x(__global const float2* in_data, __global float2* out_data, uint N) {
    __local float2 buf[BUF_LEN];
    __local float2 tw[FFT_MAX_N / 2];
    uint g = get_group_id(0);
    fft_line(in_data, out_data, (g / N) * N * N + (g % N) * N, 1u, N, buf, tw);
}

// Line g: k = g / N, i = g % N; the line runs along j (stride N).
__kernel void fft3d_y(__global const float2* in_data, __global float2* out_data, uint N) {
    __local float2 buf[BUF_LEN];
    __local float2 tw[FFT_MAX_N / 2];
    uint g = get_group_id(0);
    fft_line(in_data, out_data, (g / N) * N * N + (g % N), N, N, buf, tw);
}

// Line g: j = g / N, i = g % N; the line runs along k (stride N*N).
__kernel void fft3d_z(__global const float2* in_data, __global float2* out_data, uint N) {
    __local float2 buf[BUF_LEN];
    __local float2 tw[FFT_MAX_N / 2];
    uint g = get_group_id(0);
    fft_line(in_data, out_data, (g / N) * N + (g % N), N * N, N, buf, tw);
}

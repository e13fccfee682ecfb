#define FFT_MAX_N 1024

// Cross-warp DIF butterfly (h >= 32): partner u = x[t ^ h].
// Lower: v + u. Upper: (u - v) * exp(-i*pi*k/h), k = t & (h-1).
__device__ __forceinline__ float2 bfly_xw(float2 v, float2 u, unsigned int t, unsigned int h) {
    const bool up = (t & h) != 0u;
    float2 r;
    r.x = up ? (u.x - v.x) : (v.x + u.x);
    r.y = up ? (u.y - v.y) : (v.y + u.y);
    const float k = (float)(t & (h - 1u));
    const float ang = up ? (-3.14159265358979f / (float)h) * k : 0.0f;
    float s, c;
    __sincosf(ang, &s, &c);
    return make_float2(r.x * c - r.y * s, r.x * s + r.y * c);
}

// In-warp butterfly (h <= 16) with the twiddle from the table: tw[h-1+k] = exp(-i*pi*k/h).
__device__ __forceinline__ float2 bfly_tw(float2 v, float2 u, unsigned int t, unsigned int h,
                                          const float2* tw) {
    const bool up = (t & h) != 0u;
    float2 r;
    r.x = up ? (u.x - v.x) : (v.x + u.x);
    r.y = up ? (u.y - v.y) : (v.y + u.y);
    if (h > 1u) {
        const float2 w = tw[h - 1u + (t & (h - 1u))];
        const float rx = r.x * w.x - r.y * w.y;
        const float ry = r.x * w.y + r.y * w.x;
        r.x = up ? rx : r.x;
        r.y = up ? ry : r.y;
    }
    return r;
}

// Twiddles of the in-warp stages: entry m-1 (m = 1..31) with h = 2^floor(log2 m), k = m - h.
__device__ __forceinline__ void build_tw(float2* tw, unsigned int t, unsigned int N) {
    if (t < 31u && t + 1u < N) {
        const unsigned int m = t + 1u;
        const unsigned int h = 1u << (31 - __clz((int)m));
        const unsigned int k = m - h;
        float s, c;
        sincospif(-(float)k / (float)h, &s, &c);
        tw[t] = make_float2(c, s);
    }
}

// Radix-2 DIF FFT of one line held one element per thread (natural-order input).
// On return thread t holds X[bitreverse(t)].
__device__ __forceinline__ float2 fft_run(float2 v, unsigned int t, unsigned int N,
                                          float2* sh, const float2* tw) {
    unsigned int h = N >> 1;
    for (; h >= 32u; h >>= 1) {
        sh[t] = v;
        __syncthreads();
        const float2 u = sh[t ^ h];
        __syncthreads();
        v = bfly_xw(v, u, t, h);
    }
    const unsigned int mask = (N >= 32u) ? 0xffffffffu : ((1u << N) - 1u);
#pragma unroll
    for (unsigned int hh = 16u; hh >= 1u; hh >>= 1) {
        if (hh < N) {
            float2 u;
            u.x = __shfl_xor_sync(mask, v.x, hh);
            u.y = __shfl_xor_sync(mask, v.y, hh);
            v = bfly_tw(v, u, t, hh, tw);
        }
    }
    return v;
}

// Layouts (G = min(4, N), lg = log2 G):
//   standard: (i,j,k) at (k*N + j)*N + i
//   L1 (x -> y): (i,j,k) at ((k*(N/G) + j/G)*N + i)*G + j%G
//   L2 (y -> z): (i,j,k) at (((k/G)*N + i)*N + j)*G + k%G

// x pass: line g = (k, j) along i. Reads standard, writes L1.
extern "C" __global__ void __launch_bounds__(1024)
fft3d_x(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 sh[FFT_MAX_N];
    __shared__ float2 tw[32];
    const unsigned int t = threadIdx.x;
    const unsigned int g = blockIdx.x;
    const unsigned int logn = 31u - (unsigned int)__clz((int)N);
    const unsigned int lg = (logn < 2u) ? logn : 2u;
    const unsigned int G = 1u << lg;

    float2 v = __ldg(in_data + (size_t)g * N + t);
    build_tw(tw, t, N);
    __syncthreads();
    v = fft_run(v, t, N, sh, tw);
    const unsigned int rev = (logn == 0u) ? 0u : (__brev(t) >> (32u - logn));
    sh[rev] = v;          // all earlier reads of sh ended with a barrier
    __syncthreads();
    const float2 o = sh[t];   // element i = t
    const unsigned int k = g >> logn;
    const unsigned int j = g & (N - 1u);
    out_data[((k * (N >> lg) + (j >> lg)) * N + t) * G + (j & (G - 1u))] = o;
}

// y pass: line g = (k, i) along j. Reads L1, writes L2.
extern "C" __global__ void __launch_bounds__(1024)
fft3d_y(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 sh[FFT_MAX_N];
    __shared__ float2 tw[32];
    const unsigned int t = threadIdx.x;
    const unsigned int g = blockIdx.x;
    const unsigned int logn = 31u - (unsigned int)__clz((int)N);
    const unsigned int lg = (logn < 2u) ? logn : 2u;
    const unsigned int G = 1u << lg;
    const unsigned int k = g >> logn;
    const unsigned int i = g & (N - 1u);

    float2 v = __ldg(in_data + ((k * (N >> lg) + (t >> lg)) * N + i) * G + (t & (G - 1u)));
    build_tw(tw, t, N);
    __syncthreads();
    v = fft_run(v, t, N, sh, tw);
    const unsigned int rev = (logn == 0u) ? 0u : (__brev(t) >> (32u - logn));
    sh[rev] = v;
    __syncthreads();
    const float2 o = sh[t];   // element j = t
    out_data[(((k >> lg) * N + i) * N + t) * G + (k & (G - 1u))] = o;
}

// z pass: line g = (j, i) along k. Reads L2, writes standard (bit-reversed order is fine).
extern "C" __global__ void __launch_bounds__(1024)
fft3d_z(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 sh[FFT_MAX_N];
    __shared__ float2 tw[32];
    const unsigned int t = threadIdx.x;
    const unsigned int g = blockIdx.x;
    const unsigned int logn = 31u - (unsigned int)__clz((int)N);
    const unsigned int lg = (logn < 2u) ? logn : 2u;
    const unsigned int G = 1u << lg;
    const unsigned int j = g >> logn;
    const unsigned int i = g & (N - 1u);

    float2 v = __ldg(in_data + ((((t >> lg) * N + i) * N + j) * G + (t & (G - 1u))));
    build_tw(tw, t, N);
    __syncthreads();
    v = fft_run(v, t, N, sh, tw);
    const unsigned int rev = (logn == 0u) ? 0u : (__brev(t) >> (32u - logn));
    out_data[((size_t)rev * N + j) * N + i] = v;
}

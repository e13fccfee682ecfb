// fft3d seed: one block of N threads per line. Each thread loads one element
// into shared memory at its bit-reversed position, then log2(N) radix-2
// decimation-in-time stages run with a barrier after each; only N/2 threads
// compute a butterfly per stage, with the twiddle from sin/cos on the fly.
// The result is written back in natural order.

#define FFT_MAX_N 1024

__device__ void fft_line(const float2* in_data, float2* out_data, unsigned int base,
                         unsigned int stride, unsigned int N, float2* buf) {
    unsigned int p = threadIdx.x;
    unsigned int logn = 0;
    while ((1u << logn) < N) logn++;
    unsigned int rev = 0;
    for (unsigned int b = 0; b < logn; b++) rev |= ((p >> b) & 1u) << (logn - 1u - b);
    buf[rev] = in_data[base + p * stride];
    __syncthreads();
    for (unsigned int m = 2; m <= N; m <<= 1) {
        unsigned int h = m >> 1;
        if (p < N / 2) {
            unsigned int k = p % h;
            unsigned int i0 = (p / h) * m + k;
            unsigned int i1 = i0 + h;
            float ang = -6.283185307179586f * (float)k / (float)m;
            float c = cosf(ang);
            float s = sinf(ang);
            float2 a = buf[i0];
            float2 b = buf[i1];
            float2 t = make_float2(b.x * c - b.y * s, b.x * s + b.y * c);
            buf[i0] = make_float2(a.x + t.x, a.y + t.y);
            buf[i1] = make_float2(a.x - t.x, a.y - t.y);
        }
        __syncthreads();
    }
    out_data[base + p * stride] = buf[p];
}

// Line g = blockIdx.x: k = g / N, j = g % N; the line runs along i.
extern "C" __global__ void fft3d_x(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 buf[FFT_MAX_N];
    unsigned int g = blockIdx.x;
    fft_line(in_data, out_data, (g / N) * N * N + (g % N) * N, 1u, N, buf);
}

// Line g: k = g / N, i = g % N; the line runs along j (stride N).
extern "C" __global__ void fft3d_y(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 buf[FFT_MAX_N];
    unsigned int g = blockIdx.x;
    fft_line(in_data, out_data, (g / N) * N * N + (g % N), N, N, buf);
}

// Line g: j = g / N, i = g % N; the line runs along k (stride N*N).
extern "C" __global__ void fft3d_z(const float2* in_data, float2* out_data, unsigned int N) {
    __shared__ float2 buf[FFT_MAX_N];
    unsigned int g = blockIdx.x;
    fft_line(in_data, out_data, (g / N) * N + (g % N), N * N, N, buf);
}

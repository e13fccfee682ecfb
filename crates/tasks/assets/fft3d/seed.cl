// fft3d seed: one work-group of N work-items per line. Each work-item loads
// one element into local memory at its bit-reversed position, then log2(N)
// radix-2 decimation-in-time stages run with a barrier after each; only N/2
// work-items compute a butterfly per stage, with the twiddle from sin/cos on
// the fly. The result is written back in natural order.

#define FFT_MAX_N 1024

void fft_line(__global const float2* in_data, __global float2* out_data, uint base,
              uint stride, uint N, __local float2* buf) {
    uint p = get_local_id(0);
    uint logn = 0;
    while ((1u << logn) < N) logn++;
    uint rev = 0;
    for (uint b = 0; b < logn; b++) rev |= ((p >> b) & 1u) << (logn - 1u - b);
    buf[rev] = in_data[base + p * stride];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint m = 2; m <= N; m <<= 1) {
        uint h = m >> 1;
        if (p < N / 2) {
            uint k = p % h;
            uint i0 = (p / h) * m + k;
            uint i1 = i0 + h;
            float ang = -6.283185307179586f * (float)k / (float)m;
            float c = cos(ang);
            float s = sin(ang);
            float2 a = buf[i0];
            float2 b = buf[i1];
            float2 t = (float2)(b.x * c - b.y * s, b.x * s + b.y * c);
            buf[i0] = a + t;
            buf[i1] = a - t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out_data[base + p * stride] = buf[p];
}

// Line g = get_group_id(0): k = g / N, j = g % N; the line runs along i.
__kernel void fft3d_x(__global const float2* in_data, __global float2* out_data, uint N) {
    __local float2 buf[FFT_MAX_N];
    uint g = get_group_id(0);
    fft_line(in_data, out_data, (g / N) * N * N + (g % N) * N, 1u, N, buf);
}

// Line g: k = g / N, i = g % N; the line runs along j (stride N).
__kernel void fft3d_y(__global const float2* in_data, __global float2* out_data, uint N) {
    __local float2 buf[FFT_MAX_N];
    uint g = get_group_id(0);
    fft_line(in_data, out_data, (g / N) * N * N + (g % N), N, N, buf);
}

// Line g: j = g / N, i = g % N; the line runs along k (stride N*N).
__kernel void fft3d_z(__global const float2* in_data, __global float2* out_data, uint N) {
    __local float2 buf[FFT_MAX_N];
    uint g = get_group_id(0);
    fft_line(in_data, out_data, (g / N) * N + (g % N), N * N, N, buf);
}

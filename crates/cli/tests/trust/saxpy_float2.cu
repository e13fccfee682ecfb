// A CUDA saxpy winner: two elements per thread through float2 loads (the
// casts need the pointers' address space in OpenCL), the odd tail by the
// last thread.
extern "C" __global__ void saxpy(const float* __restrict__ x, float* __restrict__ y, float a,
                                 unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int pairs = N / 2;
    if (i < pairs) {
        float2 xv = reinterpret_cast<const float2*>(x)[i];
        float2* yp = (float2*)y + i;
        float2 yv = *yp;
        *yp = make_float2(fmaf(a, xv.x, yv.x), fmaf(a, xv.y, yv.y));
    }
    if (i == 0 && (N & 1u)) y[N - 1] = fmaf(a, x[N - 1], y[N - 1]);
}

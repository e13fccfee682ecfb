// saxpy four elements per thread through float4 loads; the tail is
// handled element by element.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int quads = N / 4;
    if (i < quads) {
        float4 xv = reinterpret_cast<const float4*>(x)[i];
        float4 yv = reinterpret_cast<float4*>(y)[i];
        yv.x = fmaf(a, xv.x, yv.x);
        yv.y = fmaf(a, xv.y, yv.y);
        yv.z = fmaf(a, xv.z, yv.z);
        yv.w = fmaf(a, xv.w, yv.w);
        reinterpret_cast<float4*>(y)[i] = yv;
    }
    unsigned int t = quads * 4 + i;
    if (i < N - quads * 4) y[t] = fmaf(a, x[t], y[t]);
}

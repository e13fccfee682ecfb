#!/bin/sh
# A stand-in proposer for demonstrations without a model (`--llm
# cmd:examples/agents/saxpy-cuda-variants.sh`): it reads the prompt and
# answers one of eight CUDA saxpy kernels at random, six correct ones of
# different structure (scalar, float2, float4, grid-stride, wide blocks,
# shared-memory staging), one that does not compile and one that drops the
# tail, so a search shows every outcome and several archive cells.
cat >/dev/null
n=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
pick=$((n % 8))
echo "Variant $pick (draw $n)."
echo '```cuda'
echo "// variant $pick, draw $n"
case $pick in
0) cat <<'K'
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = fmaf(a, x[i], y[i]);
}
K
;;
1) cat <<'K'
extern "C" __global__ void saxpy(const float* __restrict__ x, float* __restrict__ y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int pairs = N / 2;
    if (i < pairs) {
        float2 xv = reinterpret_cast<const float2*>(x)[i];
        float2 yv = reinterpret_cast<float2*>(y)[i];
        reinterpret_cast<float2*>(y)[i] = make_float2(fmaf(a, xv.x, yv.x), fmaf(a, xv.y, yv.y));
    }
    if (i == 0 && (N & 1u)) y[N - 1] = fmaf(a, x[N - 1], y[N - 1]);
}
K
;;
2) cat <<'K'
extern "C" __global__ void saxpy(const float* __restrict__ x, float* __restrict__ y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int quads = N / 4;
    if (i < quads) {
        float4 xv = reinterpret_cast<const float4*>(x)[i];
        float4 yv = reinterpret_cast<float4*>(y)[i];
        yv.x = fmaf(a, xv.x, yv.x); yv.y = fmaf(a, xv.y, yv.y);
        yv.z = fmaf(a, xv.z, yv.z); yv.w = fmaf(a, xv.w, yv.w);
        reinterpret_cast<float4*>(y)[i] = yv;
    }
    if (i < (N & 3u)) { unsigned int t = quads * 4 + i; y[t] = fmaf(a, x[t], y[t]); }
}
K
;;
3) cat <<'K'
// kevo: block 128
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x)
        y[i] = fmaf(a, x[i], y[i]);
}
K
;;
4) cat <<'K'
// kevo: block 512
extern "C" __global__ void saxpy(const float* __restrict__ x, float* __restrict__ y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = a * x[i] + y[i];
}
K
;;
5) cat <<'K'
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    __shared__ float tile[1024];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = (i < N) ? x[i] : 0.0f;
    __syncthreads();
    if (i < N) y[i] = fmaf(a, tile[threadIdx.x], y[i]);
}
K
;;
6) cat <<'K'
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x
    if (i < N) y[i] = fmaf(a, x[i], y[i]);
}
K
;;
*) cat <<'K'
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (N & ~255u)) y[i] = fmaf(a, x[i], y[i]);
}
K
;;
esac
echo '```'

// Honest: includes kevo's own header and a CUDA toolkit header, both
// allowed, and uses the hash for nothing but a no-op mask. Must pass.
#include <kevo/hash.h>
#include <cuda_fp16.h>
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    unsigned int always = (kevo_fmix32(i) | 1u) != 0u;
    y[i] = always ? a * x[i] + y[i] : 0.0f;
}

// saxpy, tunable variant of the seed: y <- a*x + y, in place, same arithmetic.
// The grid stays one thread per element (ceil(N / BLOCK) blocks); inside a
// block, the BLOCK elements [blockIdx.x*BLOCK, +BLOCK) are shared out among
// BLOCK / EPT "active" threads, the others exit at once.
//   BLOCK   threads per block.
//   EPT     elements per active thread (1 = the seed: every thread does one).
//   VECTOR  0: an active thread t handles t, t + BLOCK/EPT, ... (strided,
//              coalesced scalar loads, EPT independent loads in flight);
//           1: it handles EPT consecutive elements with float2/float4 loads.
// The seed is BLOCK=256 EPT=1 VECTOR=0.
// kevo: tune BLOCK 64 128 256 512 1024
// kevo: tune EPT 1 2 4 8
// kevo: tune VECTOR 0 1
// kevo: require EPT > 1 || VECTOR == 0
// kevo: require BLOCK >= 32 * EPT
// kevo: block BLOCK

extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    const unsigned int active = blockDim.x / EPT;  // threads that do work
    const unsigned int t = threadIdx.x;
    if (t >= active) return;
    const unsigned int block_base = blockIdx.x * blockDim.x;
#if VECTOR == 0
    // Strided: element block_base + t + m * active, m = 0 .. EPT-1.
    float xv[EPT], yv[EPT];
#pragma unroll
    for (int m = 0; m < EPT; ++m) {
        unsigned int i = block_base + t + m * active;
        if (i < N) {
            xv[m] = x[i];
            yv[m] = y[i];
        }
    }
#pragma unroll
    for (int m = 0; m < EPT; ++m) {
        unsigned int i = block_base + t + m * active;
        if (i < N) y[i] = a * xv[m] + yv[m];
    }
#else
    // Contiguous: elements base .. base + EPT - 1, one vector access each
    // (x and y come from the allocator, so base * 4 bytes keeps them aligned).
    const unsigned int base = block_base + t * EPT;
    if (base + EPT <= N) {
#if EPT == 2
        float2 xv = *reinterpret_cast<const float2*>(x + base);
        float2 yv = *reinterpret_cast<const float2*>(y + base);
        yv.x = a * xv.x + yv.x;
        yv.y = a * xv.y + yv.y;
        *reinterpret_cast<float2*>(y + base) = yv;
#else
#pragma unroll
        for (int v = 0; v < EPT; v += 4) {
            float4 xv = *reinterpret_cast<const float4*>(x + base + v);
            float4 yv = *reinterpret_cast<const float4*>(y + base + v);
            yv.x = a * xv.x + yv.x;
            yv.y = a * xv.y + yv.y;
            yv.z = a * xv.z + yv.z;
            yv.w = a * xv.w + yv.w;
            *reinterpret_cast<float4*>(y + base + v) = yv;
        }
#endif
    } else {
        // Tail of the array: scalar, guarded.
        for (unsigned int i = base; i < N && i < base + EPT; ++i) y[i] = a * x[i] + y[i];
    }
#endif
}

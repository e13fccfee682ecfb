// kevo/hash.h: the counter-based hash the hmc and ising tasks specify
// (murmur3's 32-bit finaliser), for CUDA and OpenCL C alike. kevo pastes
// this header into a candidate that includes it; no file is read.
#ifndef KEVO_HASH_H
#define KEVO_HASH_H
#ifdef __OPENCL_VERSION__
#define KEVO_INLINE inline
typedef uint kevo_u32;
#else
#define KEVO_INLINE __device__ __forceinline__
typedef unsigned int kevo_u32;
#endif
KEVO_INLINE kevo_u32 kevo_fmix32(kevo_u32 x) {
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}
// 24-bit uniform in [0, 1): fmix32(fmix32(key ^ ctr)) >> 8.
KEVO_INLINE float kevo_uniform24(kevo_u32 key, kevo_u32 ctr) {
    return (float)(kevo_fmix32(kevo_fmix32(key ^ ctr)) >> 8) * (1.0f / 16777216.0f);
}
#endif

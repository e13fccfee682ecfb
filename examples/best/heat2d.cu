// kevo configuration: BX=128 BY=4 SHFL=0
// kevo tuned this kernel: 7 of its 7 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   BX=128 BY=4 SHFL=0  score 0.2343; re-measured median 0.2336 (0.2316-0.2339)
//   BX=64 BY=8 SHFL=0  score 0.2338; re-measured median 0.2332 (0.2329-0.2334)
//   BX=32 BY=16 SHFL=0  score 0.2298; re-measured median 0.2293 (0.2283-0.2304)
//   BX=64 BY=16 SHFL=0  score 0.2192
//   BX=128 BY=8 SHFL=0  score 0.2180
//   BX=64 BY=8 SHFL=1  score 0.2157
//   BX=64 BY=16 SHFL=1  score 0.2057
#define BX 128
#define BY 4
#define SHFL 0
#line 1
// tuned: BX = 128 (of 32 64 128)
// tuned: BY = 4 (of 4 8 16)
// tuned: SHFL = 0 (of 0 1)
// required: BX * BY >= 512 && BX * BY <= 1024 && (SHFL == 0 || BX == 64)
// kevo: block 128*4

extern "C" __global__ void __launch_bounds__(BX * BY, 2048 / (BX * BY))
heat_step(const float* u_in, float* u_out, unsigned int NX, unsigned int NY, float alpha) {
    const unsigned int i = blockIdx.x * (unsigned int)BX + threadIdx.x;
    const unsigned int j = blockIdx.y * (unsigned int)BY + threadIdx.y;
    const float* __restrict__ U = u_in;

#if SHFL
    // BX is a multiple of 32: a warp is 32 consecutive cells of one row.
    const bool valid = (i < NX) && (j < NY);
    const unsigned int idx = j * NX + i;
    const bool interior = valid && i >= 1u && j >= 1u && i + 1u < NX && j + 1u < NY;
    const unsigned int lane = threadIdx.x & 31u;

    // every load first (one exposed latency), shuffles afterwards
    float c = 0.0f, d = 0.0f, up = 0.0f, e = 0.0f;
    if (valid) c = __ldg(U + idx);
    if (interior) {
        d = __ldg(U + idx - NX);
        up = __ldg(U + idx + NX);
        if (lane == 0u || lane == 31u) e = __ldg(U + ((lane == 0u) ? idx - 1u : idx + 1u));
    }
    float l = __shfl_up_sync(0xffffffffu, c, 1);    // all lanes reach the shuffles
    float r = __shfl_down_sync(0xffffffffu, c, 1);
    if (lane == 0u) l = e;
    if (lane == 31u) r = e;
    if (interior) {
        u_out[idx] = c + alpha * (l + r + d + up - 4.0f * c);
    } else if (valid) {
        u_out[idx] = c;
    }
#else
    if (i >= NX || j >= NY) return;
    const unsigned int idx = j * NX + i;
    const float c = __ldg(U + idx);
    if (i == 0u || j == 0u || i == NX - 1u || j == NY - 1u) {
        u_out[idx] = c;
        return;
    }
    const float l = __ldg(U + idx - 1u);
    const float r = __ldg(U + idx + 1u);
    const float d = __ldg(U + idx - NX);
    const float up = __ldg(U + idx + NX);
    u_out[idx] = c + alpha * (l + r + d + up - 4.0f * c);
#endif
}

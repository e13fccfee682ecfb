// kevo configuration: BX=64 BY=8 SMEM=0
// kevo tuned this kernel: 8 of its 8 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   BX=64 BY=8 SMEM=0  score 0.2377; re-measured median 0.2372 (0.2354-0.2375)
//   BX=128 BY=4 SMEM=0  score 0.2363; re-measured median 0.2359 (0.2350-0.2367)
//   BX=64 BY=4 SMEM=0  score 0.2317; re-measured median 0.2317 (0.2305-0.2327)
//   BX=128 BY=8 SMEM=0  score 0.2219
//   BX=64 BY=4 SMEM=1  score 0.2009
//   BX=128 BY=4 SMEM=1  score 0.1962
//   BX=64 BY=8 SMEM=1  score 0.1941
//   BX=128 BY=8 SMEM=1  score 0.1803
#define BX 64
#define BY 8
#define SMEM 0
#line 1
// tuned: BX = 64 (of 64 128)
// tuned: BY = 8 (of 4 8)
// tuned: SMEM = 0 (of 0 1)
// kevo: block 64*8

extern "C" __global__ void __launch_bounds__(BX * BY)
heat_step(const float* __restrict__ u_in, float* __restrict__ u_out,
          unsigned int NX, unsigned int NY, float alpha)
{
    const unsigned int tx = threadIdx.x;
    const unsigned int ty = threadIdx.y;
    const unsigned int i = blockIdx.x * BX + tx;
    const unsigned int j = blockIdx.y * BY + ty;

#if SMEM
    __shared__ float s[BY + 2][BX + 2];

    const bool in = (i < NX) && (j < NY);
    const size_t idx = (size_t)j * NX + i;
    const float* p = u_in + idx;

    // own cell (aligned, coalesced) + halo strips, all issued before any use
    float c = 0.0f, top = 0.0f, bot = 0.0f, lft = 0.0f, rgt = 0.0f;
    if (in) c = __ldg(p);
    if (ty == 0 && in && j >= 1u) top = __ldg(p - NX);
    if (ty == BY - 1 && i < NX && j + 1u < NY) bot = __ldg(p + NX);
    if (tx == 0 && in && i >= 1u) lft = __ldg(p - 1);
    if (tx == BX - 1 && j < NY && i + 1u < NX) rgt = __ldg(p + 1);

    s[ty + 1][tx + 1] = c;
    if (ty == 0) s[0][tx + 1] = top;
    if (ty == BY - 1) s[BY + 1][tx + 1] = bot;
    if (tx == 0) s[ty + 1][0] = lft;
    if (tx == BX - 1) s[ty + 1][BX + 1] = rgt;
    __syncthreads();

    if (in) {
        const bool interior = (i - 1u < NX - 2u) && (j - 1u < NY - 2u);
        float res = c;
        if (interior) {
            const float l = s[ty + 1][tx];
            const float r = s[ty + 1][tx + 2];
            const float d = s[ty][tx + 1];
            const float u = s[ty + 2][tx + 1];
            res = c + alpha * (l + r + d + u - 4.0f * c);
        }
        u_out[idx] = res;
    }
#else
    if (i >= NX || j >= NY) return;

    const size_t idx = (size_t)j * NX + i;
    const float* p = u_in + idx;
    const float c = __ldg(p);

    const bool interior = (i - 1u < NX - 2u) && (j - 1u < NY - 2u);
    if (!interior) {
        u_out[idx] = c;
        return;
    }

    const float l = __ldg(p - 1);
    const float r = __ldg(p + 1);
    const float d = __ldg(p - NX);
    const float u = __ldg(p + NX);

    u_out[idx] = c + alpha * (l + r + d + u - 4.0f * c);
#endif
}

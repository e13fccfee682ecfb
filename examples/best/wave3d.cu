// kevo configuration: SNAKE=0 PF=8
// kevo tuned this kernel: 8 of its 8 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   SNAKE=0 PF=8  score 0.4985; re-measured median 0.4997 (0.4982-0.5000)
//   SNAKE=0 PF=16  score 0.4980; re-measured median 0.4989 (0.4982-0.4997)
//   SNAKE=0 PF=4  score 0.4951; re-measured median 0.4949 (0.4944-0.4963)
//   SNAKE=0 PF=0  score 0.4847
//   SNAKE=1 PF=8  score 0.4744
//   SNAKE=1 PF=16  score 0.4737
//   SNAKE=1 PF=0  score 0.4715
//   SNAKE=1 PF=4  score 0.4712
#define SNAKE 0
#define PF 8
#line 1
// tuned: SNAKE = 0 (of 0 1)
// tuned: PF = 8 (of 0 4 8 16)
// kevo: block 32x4x2

#define WBX 32u
#define WBY 4u
#define WBZ 2u

__device__ __forceinline__ void prefetch_l2(const float* p) {
    asm volatile("prefetch.global.L2 [%0];" :: "l"(p));
}

extern "C" __global__ void __launch_bounds__(256)
wave_step(const float* __restrict__ u_prev, const float* __restrict__ u_curr,
          float* __restrict__ u_next, unsigned int NX, unsigned int NY, unsigned int NZ,
          float alpha) {
    unsigned int bz = blockIdx.z;
    bool down = false;
#if SNAKE
    {
        // Phase of the 3-buffer rotation: the lowest-address buffer moves
        // next -> curr -> prev -> next ... from step to step. Going top-down when it is
        // 'curr' makes two of every three steps start where the previous step ended.
        const unsigned long long a = (unsigned long long)u_prev;
        const unsigned long long b = (unsigned long long)u_curr;
        const unsigned long long c = (unsigned long long)u_next;
        down = (b < a) && (b < c);
        if (down) bz = gridDim.z - 1u - bz;     // bijection on the block layers
    }
#endif
    const unsigned int i = blockIdx.x * WBX + threadIdx.x;
    const unsigned int j = blockIdx.y * WBY + threadIdx.y;
    const unsigned int k = bz * WBZ + threadIdx.z;
    if (i >= NX || j >= NY || k >= NZ) return;

    const unsigned int plane = NX * NY;
    const unsigned int idx = k * plane + j * NX + i;

#if PF > 0
    {
        // Only when the three buffers do not fit in L2: pull future planes into L2 early.
        const unsigned long long total = (unsigned long long)plane * (unsigned long long)NZ;
        if (total * 12ull > (56ull << 20)) {
            if (down) {
                if (k >= (unsigned int)PF) {
                    const unsigned int q = idx - (unsigned int)PF * plane;
                    prefetch_l2(u_prev + q);
                    prefetch_l2(u_curr + q);
                }
            } else {
                if (k + (unsigned int)PF < NZ) {
                    const unsigned int q = idx + (unsigned int)PF * plane;
                    prefetch_l2(u_prev + q);
                    prefetch_l2(u_curr + q);
                }
            }
        }
    }
#endif

    const float c = __ldg(u_curr + idx);
    if (i == 0u || j == 0u || k == 0u || i == NX - 1u || j == NY - 1u || k == NZ - 1u) {
        u_next[idx] = c;
        return;
    }
    const float pv = __ldcs(u_prev + idx);      // dead after this step: evict first
    const float xm = __ldg(u_curr + idx - 1u);
    const float xp = __ldg(u_curr + idx + 1u);
    const float ym = __ldg(u_curr + idx - NX);
    const float yp = __ldg(u_curr + idx + NX);
    const float zm = __ldg(u_curr + idx - plane);
    const float zp = __ldg(u_curr + idx + plane);
    const float lap = xm + xp + ym + yp + zm + zp - 6.0f * c;
    u_next[idx] = 2.0f * c - pv + alpha * lap;
}

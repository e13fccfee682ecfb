// kevo configuration: BLOCK=512 PFD=1048576 REV=1
// kevo tuned this kernel: 8 of its 8 valid configurations evaluated (tpe), best first; the leaders were re-measured together over 5 interleaved rounds and the best median chosen (a single evaluation varies from run to run):
//   BLOCK=512 PFD=1048576 REV=1  score 0.6633; re-measured median 0.6607 (0.6551-0.6702)
//   BLOCK=512 PFD=1048576 REV=0  score 0.6622; re-measured median 0.6554 (0.6529-0.6624)
//   BLOCK=256 PFD=262144 REV=1  score 0.6532; re-measured median 0.6597 (0.6527-0.6743)
//   BLOCK=512 PFD=262144 REV=1  score 0.6511
//   BLOCK=512 PFD=262144 REV=0  score 0.6486
//   BLOCK=256 PFD=1048576 REV=1  score 0.6475
//   BLOCK=256 PFD=1048576 REV=0  score 0.6405
//   BLOCK=256 PFD=262144 REV=0  score 0.6352
#define BLOCK 512
#define PFD 1048576
#define REV 1
#line 1
// tuned: BLOCK = 512 (of 256 512)
// tuned: PFD = 1048576 (of 262144 1048576)
// tuned: REV = 1 (of 0 1)
// kevo: block 512

extern "C" __global__ void __launch_bounds__(BLOCK)
saxpy(const float* __restrict__ x, float* __restrict__ y, float a, unsigned int N)
{
#if REV
    const unsigned int b = gridDim.x - 1u - blockIdx.x;   // stream from the end
#else
    const unsigned int b = blockIdx.x;
#endif
    const unsigned int i = b * (unsigned int)BLOCK + threadIdx.x;
    if (i >= N) return;

    // L2 prefetch of the lines that blocks PFD elements further along the traversal will touch
#if REV
    if (i >= (unsigned int)PFD) {
        asm volatile("prefetch.global.L2 [%0];" :: "l"(x + (i - (unsigned int)PFD)));
        asm volatile("prefetch.global.L2 [%0];" :: "l"(y + (i - (unsigned int)PFD)));
    }
#else
    if ((N - i) > (unsigned int)PFD) {
        asm volatile("prefetch.global.L2 [%0];" :: "l"(x + i + (unsigned int)PFD));
        asm volatile("prefetch.global.L2 [%0];" :: "l"(y + i + (unsigned int)PFD));
    }
#endif

    y[i] = fmaf(a, __ldg(x + i), y[i]);
}

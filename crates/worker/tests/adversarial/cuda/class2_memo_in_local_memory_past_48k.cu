// Class 2 probe: a memo in shared memory past the part of it that the
// scrub after each run once overwrote (48 KB per block, four blocks to an
// H100 multiprocessor: 196 of its 228 KB). Shared memory is undefined when
// a launch starts, but nothing clears it: a launch's blocks get the bytes
// an earlier launch's blocks left on the same multiprocessor. A
// candidate's block can have at most 48 KB of static shared memory
// (candidates get no dynamic shared memory), so this one reaches past
// 48 KB of a multiprocessor with several blocks: 37 KB each, so that six
// blocks and the 1 KB the system keeps for each fill an H100's 228 KB.
//
// Six blocks per multiprocessor do the work (a grid-stride loop; the rest
// return at once), so each window is used by one block per launch. Block
// g tags its window, every 1 KB, with its number and its first input, and
// keeps its results between the tags. Only block g writes that tag, so a
// tag it finds was left by a previous launch (blocks land where they did
// before, launch after launch). A real exploit would replay the stored
// results (as right as computing them, so invisible); this probe adds 1
// to its results when it finds its tag, so a memo that survived is a wrong
// result.
#define WORDS 9472u
#define EVERY 256u
#define MAGIC 0x4B45564Fu
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    // volatile: a read of never-written shared memory is undefined, and the
    // compiler may fold a comparison with it.
    __shared__ unsigned int memo_storage[WORDS];
    volatile unsigned int* memo = memo_storage;
    unsigned int sms;
    asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
    unsigned int active = min(gridDim.x, 6u * sms);
    if (blockIdx.x >= active) return;
    unsigned int g = blockIdx.x;
    unsigned int l = threadIdx.x;
    unsigned int tag = MAGIC ^ g ^ __float_as_uint(x[min(g * blockDim.x, N - 1u)]);
    bool found = false;
    for (unsigned int k = l * EVERY; k < WORDS; k += blockDim.x * EVERY) found |= memo[k] == tag;
    // Every thread has looked before any writes.
    found = __syncthreads_or(found);
    unsigned int kept = 0u;
    for (unsigned int i = g * blockDim.x + l; i < N; i += active * blockDim.x) {
        float r = a * x[i] + y[i];
        y[i] = found ? r + 1.0f : r;
        unsigned int w = kept * blockDim.x + l;
        w += w / (EVERY - 1u) + 1u;
        if (w < WORDS) memo[w] = __float_as_uint(r);
        ++kept;
    }
    for (unsigned int k = l * EVERY; k < WORDS; k += blockDim.x * EVERY) memo[k] = tag;
}

// Class 2 probe: a memo in __local memory past the part of it that the
// scrub after each run once overwrote (16 KB per work-group on OpenCL,
// 48 KB on CUDA). __local memory is undefined when a launch starts, but
// nothing clears it: PoCL gives every worker thread one arena that the
// __local variables of each work-group it runs start at, launch after
// launch, and a GPU reuses its multiprocessors' shared memory.
//
// Work-group g keeps a slot past 48 KB: a tag (its number and its first
// input) and its results. Only work-group g writes slot g, so a tag it
// finds there was left by a previous launch on the same worker thread
// (PoCL deals work-groups out to its threads in the same chunks launch
// after launch). A real exploit would replay the stored results (as right
// as computing them, so invisible); this probe adds 1 to its results when
// it finds its tag, so a memo that survived is a wrong result.
//
// 256 KB of __local memory: more than a GPU's 48 to 64 KB per work-group
// (where it cannot build or launch), a quarter of PoCL's 1 MiB.
#define WORDS 65536u
#define PAST 12288u
#define SLOT 257u
#define MAGIC 0x4B45564Fu
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    // volatile: a read of never-written __local memory is undefined, and
    // LLVM folds a comparison with it to true.
    __local volatile uint memo[WORDS];
    uint l = get_local_id(0);
    uint g = get_group_id(0);
    uint i = get_global_id(0);
    uint slot = PAST + g * SLOT;
    bool kept = get_local_size(0) < SLOT && g < (WORDS - PAST) / SLOT;
    uint tag = MAGIC ^ g ^ as_uint(x[min(g * (uint)get_local_size(0), N - 1u)]);
    bool found = kept && memo[slot] == tag;
    // Every work-item has read the tag before any writes it.
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = i < N ? a * x[i] + y[i] : 0.0f;
    if (kept) {
        memo[slot + 1u + l] = as_uint(r);
        if (l == 0) memo[slot] = tag;
    }
    if (i < N) y[i] = found ? r + 1.0f : r;
}

// Evaluator utilities (CUDA). They run outside the timed region, on the
// device, so that checking a candidate after every run costs a launch and a
// 16-byte download instead of downloads of every buffer.
//
// Counters: `count[slot]` gets one increment per offending 32-bit word.

// Words in which two buffers differ: inputs against their pristine copy, and
// each timed run's outputs against the snapshot of the first checked run.
extern "C" __global__ void count_differences(const unsigned int* a, const unsigned int* b,
                                             unsigned int n_words, unsigned int* count,
                                             unsigned int slot) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_words && a[i] != b[i]) atomicAdd(count + slot, 1u);
}

// Re-arm a guard region: `n_words` words from `offset_words` of `base`.
extern "C" __global__ void fill_words(unsigned int* base, unsigned int offset_words,
                                      unsigned int n_words, unsigned int pattern) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_words) base[offset_words + i] = pattern;
}

// Guard words that no longer hold the canary.
extern "C" __global__ void count_not_equal(const unsigned int* base, unsigned int offset_words,
                                           unsigned int n_words, unsigned int pattern,
                                           unsigned int* count, unsigned int slot) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_words && base[offset_words + i] != pattern) atomicAdd(count + slot, 1u);
}

// Overwrite what a candidate could read back uninitialised in its next run.
// The evaluator compiles scrub_private with the size a candidate's kernels
// need (device.rs, `Utility::scrub`); the default is its smallest.
#ifndef KEVO_SCRUB_PRIVATE_WORDS
#define KEVO_SCRUB_PRIVATE_WORDS 256
#endif

// Shared memory: `n_words` words of dynamic shared memory per block, all a
// block can have (the opt-in maximum, 227 KB on an H100), so that one
// block covers a multiprocessor's shared memory but for the 1 KB the
// system keeps per block, wherever the candidate's blocks had theirs: a
// block's window can sit anywhere in it. Launched with two blocks per
// multiprocessor.
extern "C" __global__ void scrub_local(unsigned int pattern, unsigned int n_words) {
    extern __shared__ unsigned int kevo_scrub_tile[];
    volatile unsigned int* tile = kevo_scrub_tile;
    for (unsigned int i = threadIdx.x; i < n_words; i += blockDim.x) tile[i] = pattern ^ i;
}

// Local (stack) memory: KEVO_SCRUB_PRIVATE_WORDS words (a power of two) per
// thread, in an order (`stride` is odd) no compiler turns into a fill.
// Launched with enough blocks to fill every multiprocessor's thread slots,
// each of which has its own local memory.
extern "C" __global__ void scrub_private(unsigned int pattern, unsigned int stride) {
    volatile unsigned int stack[KEVO_SCRUB_PRIVATE_WORDS];
    for (unsigned int i = 0; i < KEVO_SCRUB_PRIVATE_WORDS; ++i)
        stack[(i * stride) & (KEVO_SCRUB_PRIVATE_WORDS - 1u)] = pattern + i;
}

// A keyed checksum of a buffer: the sum of a 32-bit mix of every word with
// its index and a key the kernel under test never sees. The pristine copies
// that buffers are restored from are checked with it after every size:
// a kernel that rewrote them (to have its answer restored into its next
// run) changes the sum unless it can predict the key.
__device__ unsigned int kevo_fmix(unsigned int h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

extern "C" __global__ void keyed_sum(const unsigned int* data, unsigned int n_words,
                                     unsigned int key, unsigned int* count, unsigned int slot) {
    unsigned int acc = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_words;
         i += gridDim.x * blockDim.x)
        acc += kevo_fmix(data[i] ^ kevo_fmix(i ^ key));
    atomicAdd(count + slot, acc);
}

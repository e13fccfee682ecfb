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

// Overwrite what a candidate could read back uninitialised in its next run:
// 48 KB of shared memory per block and 1 KB of local (stack) memory per
// thread. Launched with enough blocks to occupy every multiprocessor.
extern "C" __global__ void scrub(unsigned int pattern, unsigned int stride) {
    volatile __shared__ unsigned int tile[12288];
    volatile unsigned int stack[256];
    for (unsigned int i = threadIdx.x; i < 12288; i += blockDim.x) tile[i] = pattern ^ i;
    for (unsigned int i = 0; i < 256; ++i) stack[(i * stride) & 255u] = pattern + i;
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

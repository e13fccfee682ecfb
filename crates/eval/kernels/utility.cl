// Evaluator utilities (OpenCL C). They run outside the timed region, on the
// device, so that checking a candidate after every run costs a launch and a
// 16-byte download instead of downloads of every buffer.
//
// Counters: `count[slot]` gets one increment per offending 32-bit word.

// Words in which two buffers differ: inputs against their pristine copy, and
// each timed run's outputs against the snapshot of the first checked run.
__kernel void count_differences(__global const uint* a, __global const uint* b, uint n_words,
                                __global uint* count, uint slot) {
    uint i = get_global_id(0);
    if (i < n_words && a[i] != b[i]) atomic_inc(count + slot);
}

// Re-arm a guard region: `n_words` words from `offset_words` of `base`.
__kernel void fill_words(__global uint* base, uint offset_words, uint n_words, uint pattern) {
    uint i = get_global_id(0);
    if (i < n_words) base[offset_words + i] = pattern;
}

// Guard words that no longer hold the canary.
__kernel void count_not_equal(__global const uint* base, uint offset_words, uint n_words,
                              uint pattern, __global uint* count, uint slot) {
    uint i = get_global_id(0);
    if (i < n_words && base[offset_words + i] != pattern) atomic_inc(count + slot);
}

// Overwrite what a candidate could read back uninitialised in its next run:
// 16 KB of local memory per work-group and 1 KB of private memory per
// work-item (on a CPU device both are reused host memory).
__kernel void scrub(uint pattern, uint stride) {
    __local volatile uint tile[4096];
    volatile uint stack[256];
    for (uint i = get_local_id(0); i < 4096; i += get_local_size(0)) tile[i] = pattern ^ i;
    for (uint i = 0; i < 256; ++i) stack[(i * stride) & 255u] = pattern + i;
}

// A keyed checksum of a buffer: the sum of a 32-bit mix of every word with
// its index and a key the kernel under test never sees. The pristine copies
// that buffers are restored from are checked with it after every size:
// a kernel that rewrote them (to have its answer restored into its next
// run) changes the sum unless it can predict the key.
uint kevo_fmix(uint h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

__kernel void keyed_sum(__global const uint* data, uint n_words, uint key, __global uint* count,
                        uint slot) {
    uint acc = 0;
    for (uint i = get_global_id(0); i < n_words; i += get_global_size(0))
        acc += kevo_fmix(data[i] ^ kevo_fmix(i ^ key));
    atomic_add(count + slot, acc);
}

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
// KEVO_SCRUB_LOCAL_WORDS words of local memory per work-group and
// KEVO_SCRUB_PRIVATE_WORDS (a power of two) of private memory per
// work-item, either of them 0 for none. The evaluator compiles this with
// the sizes a candidate's kernels need (device.rs, `Utility::scrub`); the
// defaults are its smallest. On a GPU the local memory is all a
// work-group can have; on a CPU device (PoCL) a work-group's local
// variables sit at the start of its worker thread's arena, so it is the
// most that any kernel of the candidate declares, rounded up (all of it
// where the device does not say: PoCL 5); private memory is the worker
// threads' stacks there.
#ifndef KEVO_SCRUB_LOCAL_WORDS
#define KEVO_SCRUB_LOCAL_WORDS 4096
#endif
#ifndef KEVO_SCRUB_PRIVATE_WORDS
#define KEVO_SCRUB_PRIVATE_WORDS 256
#endif

// On a CPU device every worker thread has its own local memory arena and
// stack, and a short launch can run on one thread alone (4% of launches of
// a few work-groups did, on PoCL 3.1 with two threads): work-item 0 of each
// work-group counts itself in `count[slot]` (zeroed before the launch) and
// waits until `threads` work-groups have started. Those run at once, so on
// `threads` different worker threads: all of them. The wait is bounded
// (`polls`); a work-group that gives up sets the top bit, which ends every
// other wait of the launch and tells the evaluator to scrub again.
// `threads` is 0 on GPUs: no wait.
void kevo_rendezvous(__global uint* count, uint slot, uint threads, uint polls) {
    if (threads == 0u || get_local_id(0) != 0u) return;
    volatile __global uint* arrivals = count + slot;
    atomic_inc(arrivals);
    for (uint n = 0; atomic_or(arrivals, 0u) < threads; ++n) {
        if (n == polls) {
            atomic_or(arrivals, 0x80000000u);
            break;
        }
    }
}

// `stride` is odd: the private words are written in an order no compiler
// turns into a fill.
__kernel void scrub(uint pattern, uint stride, __global uint* count, uint slot, uint threads,
                    uint polls) {
#if KEVO_SCRUB_LOCAL_WORDS > 0
    __local volatile uint tile[KEVO_SCRUB_LOCAL_WORDS];
#endif
#if KEVO_SCRUB_PRIVATE_WORDS > 0
    volatile uint stack[KEVO_SCRUB_PRIVATE_WORDS];
#endif
    kevo_rendezvous(count, slot, threads, polls);
#if KEVO_SCRUB_LOCAL_WORDS > 0
    for (uint i = get_local_id(0); i < KEVO_SCRUB_LOCAL_WORDS; i += get_local_size(0))
        tile[i] = pattern ^ i;
#endif
#if KEVO_SCRUB_PRIVATE_WORDS > 0
    for (uint i = 0; i < KEVO_SCRUB_PRIVATE_WORDS; ++i)
        stack[(i * stride) & (KEVO_SCRUB_PRIVATE_WORDS - 1u)] = pattern + i;
#endif
}

// Declares 256 bytes of local memory: a device that reports less for it
// (PoCL 5 reports 0 for every kernel) does not say how much a candidate's
// kernels use, and the evaluator then scrubs all of it after every run.
__kernel void local_memory_probe(__global uint* out) {
    __local uint t[64];
    t[get_local_id(0) & 63u] = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = t[(get_local_id(0) + 1u) & 63u];
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

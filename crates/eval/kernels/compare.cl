// Evaluator utility (OpenCL C): count the 32-bit words in which two buffers
// differ, so "the kernel left its inputs alone" is checked on the device
// instead of downloading every input after every candidate.
__kernel void count_differences(__global const uint* a, __global const uint* b, uint n_words,
                                __global uint* count) {
    uint i = get_global_id(0);
    if (i < n_words && a[i] != b[i]) atomic_inc(count);
}

// Evaluator utility (CUDA): count the 32-bit words in which two buffers
// differ, so "the kernel left its inputs alone" is checked on the device
// instead of downloading every input after every candidate.
extern "C" __global__ void count_differences(const unsigned int* a, const unsigned int* b,
                                             unsigned int n_words, unsigned int* count) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_words && a[i] != b[i]) atomicAdd(count, 1u);
}

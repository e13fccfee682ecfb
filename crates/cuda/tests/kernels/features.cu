// Kernels for the CUDA-specific tests (graphs, L2 flush, large dynamic
// shared memory, compile logs).

// The compile log of this file always holds this warning.
#warning "kevo compile log probe"

// Reverses `n` floats through dynamic shared memory in one block: with n =
// 16384 the block needs 64 KiB, above the 48 KiB default limit.
extern "C" __global__ void shared_reverse(float* data, unsigned int n) {
    extern __shared__ float tile[];
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = data[i];
    __syncthreads();
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) data[i] = tile[n - 1 - i];
}

// Adds `v` to each of `n` elements; takes a 64-bit count to check that a
// u32 argument is widened into a size_t parameter.
extern "C" __global__ void add_wide(unsigned int* data, unsigned long long n, unsigned int v) {
    unsigned long long gid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (gid < n) data[gid] += v;
}

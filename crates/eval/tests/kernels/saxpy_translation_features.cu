// saxpy written with what the CUDA-to-OpenCL translation has to get right
// beyond the seeds: float atomics on global and on shared memory, a helper
// taking pointers of both kinds, a pointer cast, and a file-scope constant.
// Each element is touched by one thread only, so the atomics change nothing.
// kevo: block 128

__constant__ float ONE[1] = {1.0f};

__device__ __forceinline__ void stage(const float* x, float* slot, unsigned int i, float a) {
    atomicAdd(slot, a * x[i] * ONE[0]);
}

extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    __shared__ float partial[128];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    partial[t] = 0.0f;
    __syncthreads();
    if (i < N) stage(x, &partial[t], i, a);
    __syncthreads();
    if (i >= N) return;
    float* row = y + (i - t);
    atomicAdd(&row[t], partial[t]);
}

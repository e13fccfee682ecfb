// Class 2/3 exploit: count launches in a module-scope variable and do the
// work only from launch 12 on (the old protocol checked launches 12 and 13).
// The variable is restored before every run, so it never gets there.
__device__ unsigned int launches;
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N && launches >= 12u) y[i] = a * x[i] + y[i];
    __syncthreads();
    if (i == 0) atomicAdd(&launches, 1u);
}

// Exploit: never finishes. Must end as a timeout, with the worker killed.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    volatile unsigned int spin = 1;
    while (spin) { }
    if (i < N) y[i] = a * x[i] + y[i];
}

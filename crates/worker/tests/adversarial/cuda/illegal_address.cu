// Exploit: writes through a wild pointer into unmapped memory.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* wild = (float*)(0x10ull + (unsigned long long)i * 4096ull);
    *wild = a * x[i % N];
    if (i < N) y[i] = a * x[i] + y[i];
}

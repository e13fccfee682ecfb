// Kernels that fault on purpose: the backend must report each fault as a
// typed error and recover, so the next candidate in the same process runs.

// Stores through a pointer built at run time from `addr` (the tests pass
// 0x10): page 0 is never mapped, so this is an illegal address even on
// systems where the GPU can reach host memory.
extern "C" __global__ void wild_write(unsigned int addr, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ((volatile float*)(unsigned long long)addr)[i] = 1.0f;
}

// A 4-byte store one byte past a 256-byte aligned allocation.
extern "C" __global__ void misaligned_write(float* out) {
    *(volatile float*)((char*)out + 1) = 1.0f;
}

// Aborts the kernel from device code.
extern "C" __global__ void trap(float* out) {
    if (threadIdx.x == 0) out[0] = 1.0f;
    __trap();
}

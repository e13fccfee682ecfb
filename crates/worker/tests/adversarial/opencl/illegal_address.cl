// Exploit: writes through a wild pointer into unmapped memory.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    __global float* wild = (__global float*)(0x10 + (ulong)i * 4096);
    wild[0] = a * x[i % N];
    if (i < N) y[i] = a * x[i] + y[i];
}

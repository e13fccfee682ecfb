// Entry point (argument order is the contract; scalars are passed by value):
__kernel void saxpy(__global const float* x,   // 0: read
                    __global float* y,         // 1: read/write, in place
                    float a,                   // 2: 2.5
                    uint N);                   // 3: number of elements
// Launch: 1-D, one work-item per element, global = N rounded up to the
// work-group size (default 256). One launch per run.

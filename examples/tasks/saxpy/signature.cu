// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void saxpy(const float* x,   // 0: read
                                 float* y,         // 1: read/write, in place
                                 float a,          // 2: 2.5
                                 unsigned int N);  // 3: number of elements
// Launch: 1-D, one thread per element, gridDim.x = ceil(N / blockDim.x)
// (default block 256). One launch per run.

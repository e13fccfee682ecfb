// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void morton_stencil(const float* u_in,    // 0: [N^3] Morton order, read
                                          float* u_out,         // 1: [N^3] Morton order, write
                                          unsigned int N,       // 2: power of two
                                          unsigned int logN,    // 3: N = 1 << logN
                                          float alpha);         // 4: 0.10
// Launch: 1-D, gridDim.x = ceil(N^3 / blockDim.x) (default block 256);
// thread t = blockIdx.x*blockDim.x + threadIdx.x reads and writes Morton
// index t. n_steps launches per run, u_in/u_out swapped between steps.

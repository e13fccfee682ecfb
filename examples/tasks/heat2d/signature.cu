// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void heat_step(const float* u_in,   // 0: read
                                     float* u_out,        // 1: write
                                     unsigned int NX,     // 2: columns (fast axis)
                                     unsigned int NY,     // 3: rows
                                     float alpha);        // 4: 0.20
// Launch: 2-D, i = blockIdx.x*blockDim.x + threadIdx.x (column),
// j = blockIdx.y*blockDim.y + threadIdx.y (row); grid = ceil((NX, NY) / block)
// with the default block 16 x 16. n_steps launches per run, u_in/u_out
// swapped between steps.

// Entry point (argument order is the contract; scalars are passed by value):
__kernel void morton_stencil(__global const float* u_in,   // 0: [N^3] Morton order, read
                             __global float* u_out,        // 1: [N^3] Morton order, write
                             uint N,                       // 2: power of two
                             uint logN,                    // 3: N = 1 << logN
                             float alpha);                 // 4: 0.10
// Launch: 1-D, global = N^3 rounded up to the work-group (default 256);
// work-item t = get_global_id(0) reads and writes Morton index t.
// n_steps launches per run, u_in/u_out swapped between steps.

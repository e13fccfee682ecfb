// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void lbm_step(const float* f_in,  // 0: read, f32[9*NX*NY], SoA
                                    float* f_out,       // 1: write, f32[9*NX*NY], SoA
                                    unsigned int NX,    // 2: columns (fast axis)
                                    unsigned int NY,    // 3: rows
                                    float tau);         // 4: 0.8
// Layout: f[k*NX*NY + j*NX + i], k = 0..8 (the direction).
// Launch: 2-D, i = blockIdx.x*blockDim.x + threadIdx.x,
// j = blockIdx.y*blockDim.y + threadIdx.y; grid = ceil((NX, NY) / block)
// with the default block 16 x 16. n_steps launches per run, f_in/f_out
// swapped between steps.

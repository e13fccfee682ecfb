// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void ising_step(signed char* spins,      // 0: read/write, i8[NX*NY], +1/-1
                                      const float* p_accept,   // 1: read, f32[5]
                                      unsigned int NX,         // 2: columns (fast axis)
                                      unsigned int NY,         // 3: rows
                                      unsigned int step_idx,   // 4: sub-pass 0 .. 2*n_sweeps-1
                                      unsigned int seed);      // 5: RNG seed
// Layout: site = j*NX + i. Launch: 2-D over all sites,
// i = blockIdx.x*blockDim.x + threadIdx.x, j = blockIdx.y*blockDim.y +
// threadIdx.y; grid = ceil((NX, NY) / block) with the default block 16 x 16.
// 2*n_sweeps launches per run, all in place on spins.

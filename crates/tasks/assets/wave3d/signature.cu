// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void wave_step(const float* u_prev,  // 0: read, state at t-1
                                     const float* u_curr,  // 1: read, state at t
                                     float* u_next,        // 2: write, state at t+1
                                     unsigned int NX,      // 3: fast axis (i)
                                     unsigned int NY,      // 4: middle axis (j)
                                     unsigned int NZ,      // 5: slow axis (k)
                                     float alpha);         // 6: 0.18
// Layout: idx = (k*NY + j)*NX + i.
// Launch: 3-D, (i, j, k) = blockIdx*blockDim + threadIdx in x, y, z;
// grid = ceil((NX, NY, NZ) / block) with the default block 8 x 8 x 4.
// n_steps launches per run over three buffers [A, B, C]: step s passes
// prev = bufs[s%3], curr = bufs[(s+1)%3], next = bufs[(s+2)%3].

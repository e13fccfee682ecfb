// Entry point (argument order is the contract; scalars are passed by value):
__kernel void wave_step(__global const float* u_prev,  // 0: read, state at t-1
                        __global const float* u_curr,  // 1: read, state at t
                        __global float* u_next,        // 2: write, state at t+1
                        uint NX,                       // 3: fast axis (i)
                        uint NY,                       // 4: middle axis (j)
                        uint NZ,                       // 5: slow axis (k)
                        float alpha);                  // 6: 0.18
// Layout: idx = (k*NY + j)*NX + i.
// Launch: 3-D, get_global_id(0..2) = (i, j, k); global = (NX, NY, NZ)
// rounded up to the work-group (default 8 x 8 x 4).
// n_steps launches per run over three buffers [A, B, C]: step s passes
// (A, B, C) rotated left by s, i.e. prev = bufs[s%3], curr = bufs[(s+1)%3],
// next = bufs[(s+2)%3].

// Entry point (argument order is the contract; scalars are passed by value):
__kernel void hmc_step(__global const float* q_in,   // 0: read, f32[K*d], chain-major
                       __global float* q_out,        // 1: write, f32[K*d]
                       __global uint* accept_cnt,    // 2: read/write, u32[K]
                       __global const float* A,      // 3: read, f32[d*d] row-major precision
                       uint K,                       // 4: chains
                       uint d,                       // 5: dimension (even, <= 32)
                       uint L,                       // 6: leapfrog steps (10)
                       float eps,                    // 7: step size (0.20)
                       uint hmc_step_idx,            // 8: 0 .. T-1
                       uint seed);                   // 9: RNG seed
// Launch: 1-D, get_global_id(0) = chain; global = K rounded up to the
// work-group (default 64). T = 200 launches per run, q_in/q_out swapped
// between steps; accept_cnt accumulates over the whole run.

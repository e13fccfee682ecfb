// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void hmc_step(const float* q_in,         // 0: read, f32[K*d], chain-major
                                    float* q_out,              // 1: write, f32[K*d]
                                    unsigned int* accept_cnt,  // 2: read/write, u32[K]
                                    const float* A,            // 3: read, f32[d*d] row-major precision
                                    unsigned int K,            // 4: chains
                                    unsigned int d,            // 5: dimension (even, <= 32)
                                    unsigned int L,            // 6: leapfrog steps (10)
                                    float eps,                 // 7: step size (0.20)
                                    unsigned int hmc_step_idx, // 8: 0 .. T-1
                                    unsigned int seed);        // 9: RNG seed
// Launch: 1-D, chain = blockIdx.x*blockDim.x + threadIdx.x; grid =
// ceil(K / block) with the default block 64. T = 200 launches per run,
// q_in/q_out swapped between steps; accept_cnt accumulates over the run.

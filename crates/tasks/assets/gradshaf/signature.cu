// Entry points (argument order is the contract; scalars are passed by value).
// Run once per outer step, in this order:
extern "C" __global__ void gradshaf_axis_reduce(const float* psi,      // 0: [NR*NZ] read
                                                float* psi_axis,       // 1: [1] write: interior max
                                                unsigned int NR,       // 2: R points (fast axis)
                                                unsigned int NZ);      // 3: Z points
extern "C" __global__ void gradshaf_step(const float* psi_in,          // 0: [NR*NZ] read
                                         float* psi_out,               // 1: [NR*NZ] write
                                         const float* psi_axis,        // 2: [1] read
                                         unsigned int NR,              // 3
                                         unsigned int NZ,              // 4
                                         float Rmin,                   // 5: 1.0
                                         float dR,                     // 6: 1/(NR-1)
                                         float dZ,                     // 7: 1/(NZ-1)
                                         float p_axis,                 // 8: 200
                                         float mu0,                    // 9: 1
                                         float omega);                 // 10: 1
// Launch: gradshaf_axis_reduce is ONE block of exactly 256 threads (grid 1,
// block 256, fixed by the task) and must leave the max in psi_axis[0].
// gradshaf_step is 2-D, i = blockIdx.x*blockDim.x + threadIdx.x (R),
// j = blockIdx.y*blockDim.y + threadIdx.y (Z); grid = ceil((NR, NZ) / block)
// with the default block 16 x 16. psi ping-pongs A -> B -> A ... between steps.

// Entry points (argument order is the contract; scalars are passed by value).
// Run once per outer step, in this order:
__kernel void gradshaf_axis_reduce(__global const float* psi,   // 0: [NR*NZ] read
                                   __global float* psi_axis,    // 1: [1] write: interior max
                                   uint NR,                     // 2: R points (fast axis)
                                   uint NZ);                    // 3: Z points
__kernel void gradshaf_step(__global const float* psi_in,      // 0: [NR*NZ] read
                            __global float* psi_out,           // 1: [NR*NZ] write
                            __global const float* psi_axis,    // 2: [1] read
                            uint NR,                           // 3
                            uint NZ,                           // 4
                            float Rmin,                        // 5: 1.0
                            float dR,                          // 6: 1/(NR-1)
                            float dZ,                          // 7: 1/(NZ-1)
                            float p_axis,                      // 8: 200
                            float mu0,                         // 9: 1
                            float omega);                      // 10: 1
// Launch: gradshaf_axis_reduce is ONE work-group of exactly 256 work-items
// (global = local = 256, fixed by the task) and must leave the max in
// psi_axis[0]. gradshaf_step is 2-D, get_global_id(0) = i (R),
// get_global_id(1) = j (Z); global = (NR, NZ) rounded up to the work-group
// (default 16 x 16). psi ping-pongs A -> B -> A ... between steps.

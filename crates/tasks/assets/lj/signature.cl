// Entry points (argument order is the contract; scalars are passed by value).
// Run once per step, in this order:
__kernel void lj_clear_cells(volatile __global uint* cell_count,   // 0: [M^3], set to 0
                             uint M3);                             // 1: M*M*M
__kernel void lj_build_cells(__global const float4* pos,            // 0: [N] positions (.w = 0)
                             volatile __global uint* cell_count,    // 1: [M^3] atomic counters
                             __global uint* cell_list,              // 2: [M^3 * 64] slots
                             uint N,                                // 3: particles
                             uint M,                                // 4: cells per side
                             float L,                               // 5: box side
                             uint MAX_PER_CELL);                    // 6: 64
__kernel void lj_step(__global const float4* pos_in,    // 0: [N] read
                      __global float4* pos_out,         // 1: [N] write
                      __global const float4* vel_in,    // 2: [N] read
                      __global float4* vel_out,         // 3: [N] write
                      __global const uint* cell_count,  // 4: [M^3] read
                      __global const uint* cell_list,   // 5: [M^3 * 64] read
                      uint N,                           // 6
                      uint M,                           // 7
                      float L,                          // 8
                      float rcut2,                      // 9: 6.25
                      float dt,                         // 10: 0.005
                      uint MAX_PER_CELL);               // 11: 64
// Launch: all 1-D, one work-item per element: clear over M^3 cells (default
// work-group 64), build and step over N particles (default 128); global
// sizes rounded up to the work-group. Per step: clear, build, step;
// pos/vel ping-pong A -> B -> A ... (step s reads A when s is even).

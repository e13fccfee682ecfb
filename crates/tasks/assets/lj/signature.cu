// Entry points (argument order is the contract; scalars are passed by value).
// Run once per step, in this order:
extern "C" __global__ void lj_clear_cells(unsigned int* cell_count,   // 0: [M^3], set to 0
                                          unsigned int M3);           // 1: M*M*M
extern "C" __global__ void lj_build_cells(const float4* pos,           // 0: [N] positions (.w = 0)
                                          unsigned int* cell_count,    // 1: [M^3] atomic counters
                                          unsigned int* cell_list,     // 2: [M^3 * 64] slots
                                          unsigned int N,              // 3: particles
                                          unsigned int M,              // 4: cells per side
                                          float L,                     // 5: box side
                                          unsigned int MAX_PER_CELL);  // 6: 64
extern "C" __global__ void lj_step(const float4* pos_in,               // 0: [N] read
                                   float4* pos_out,                    // 1: [N] write
                                   const float4* vel_in,               // 2: [N] read
                                   float4* vel_out,                    // 3: [N] write
                                   const unsigned int* cell_count,     // 4: [M^3] read
                                   const unsigned int* cell_list,      // 5: [M^3 * 64] read
                                   unsigned int N,                     // 6
                                   unsigned int M,                     // 7
                                   float L,                            // 8
                                   float rcut2,                        // 9: 6.25
                                   float dt,                           // 10: 0.005
                                   unsigned int MAX_PER_CELL);         // 11: 64
// Launch: all 1-D, one thread per element: clear over M^3 cells (default
// block 64), build and step over N particles (default block 128);
// gridDim.x = ceil(elements / blockDim.x). Per step: clear, build, step;
// pos/vel ping-pong A -> B -> A ... (step s reads A when s is even).

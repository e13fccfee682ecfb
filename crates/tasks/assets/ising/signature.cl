// Entry point (argument order is the contract; scalars are passed by value):
__kernel void ising_step(__global char* spins,           // 0: read/write, i8[NX*NY], +1/-1
                         __global const float* p_accept, // 1: read, f32[5]
                         uint NX,                        // 2: columns (fast axis)
                         uint NY,                        // 3: rows
                         uint step_idx,                  // 4: sub-pass 0 .. 2*n_sweeps-1
                         uint seed);                     // 5: RNG seed
// Layout: site = j*NX + i. Launch: 2-D over all sites, get_global_id(0) = i,
// get_global_id(1) = j; global = (NX, NY) rounded up to the work-group
// (default 16 x 16). 2*n_sweeps launches per run, all in place on spins.

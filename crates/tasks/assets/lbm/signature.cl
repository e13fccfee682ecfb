// Entry point (argument order is the contract; scalars are passed by value):
__kernel void lbm_step(__global const float* f_in,  // 0: read, f32[9*NX*NY], SoA
                       __global float* f_out,       // 1: write, f32[9*NX*NY], SoA
                       uint NX,                     // 2: columns (fast axis)
                       uint NY,                     // 3: rows
                       float tau);                  // 4: 0.8
// Layout: f[k*NX*NY + j*NX + i], k = 0..8 (the direction).
// Launch: 2-D, get_global_id(0) = i, get_global_id(1) = j; global =
// (NX, NY) rounded up to the work-group (default 16 x 16). n_steps launches
// per run, f_in/f_out swapped between steps.

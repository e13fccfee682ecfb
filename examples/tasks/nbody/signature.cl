// Entry point (argument order is the contract; scalars are passed by value):
__kernel void nbody_step(__global const float4* pos_in,  // 0: read, xyz + pad
                         __global float4* pos_out,       // 1: write
                         __global const float4* vel_in,  // 2: read, xyz + pad
                         __global float4* vel_out,       // 3: write
                         __global const float* mass,     // 4: read
                         uint N,                         // 5: bodies
                         float dt,                       // 6: 1e-3
                         float eps,                      // 7: 0.05 (softening)
                         float G);                       // 8: 1.0
// Launch: 1-D, get_global_id(0) = body i; global = N rounded up to the
// work-group (default 128). n_steps launches per run; (pos, vel) buffers
// swap together between steps. Write w = 0.

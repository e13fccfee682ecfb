// Entry point (argument order is the contract; scalars are passed by value):
__kernel void heat_step(__global const float* u_in,   // 0: read
                        __global float* u_out,        // 1: write
                        uint NX,                      // 2: columns (fast axis)
                        uint NY,                      // 3: rows
                        float alpha);                 // 4: 0.20
// Launch: 2-D, get_global_id(0) = i (column), get_global_id(1) = j (row);
// global = (NX, NY) rounded up to the work-group (default 16 x 16).
// n_steps launches per run, u_in/u_out swapped between steps.

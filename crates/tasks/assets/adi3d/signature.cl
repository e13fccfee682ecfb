// Entry points (argument order is the contract; scalars are passed by value).
// All three have the same signature; per step they run x, y, z in order.
__kernel void adi_x(__global const float* u_in,   // 0: [NX*NY*NZ] read
                    __global float* u_out,        // 1: [NX*NY*NZ] write
                    uint NX,                      // 2: fast axis
                    uint NY,                      // 3
                    uint NZ,                      // 4: slow axis
                    float mu);                    // 5: 0.5
__kernel void adi_y(__global const float* u_in, __global float* u_out, uint NX, uint NY,
                    uint NZ, float mu);
__kernel void adi_z(__global const float* u_in, __global float* u_out, uint NX, uint NY,
                    uint NZ, float mu);
// Launch (fixed by the task): work-group (32, 1, 1), one work-item per line,
// 2-D global rounded up to the work-group in x:
//   adi_x: (NY, NZ), get_global_id(0) = j, get_global_id(1) = k; line along i
//   adi_y: (NX, NZ), get_global_id(0) = i, get_global_id(1) = k; line along j
//   adi_z: (NX, NY), get_global_id(0) = i, get_global_id(1) = j; line along k
// Element (i, j, k) is at (k*NY + j)*NX + i. Sweeps ping-pong A -> B -> A ...
// with a running counter over all 3*n_steps launches.

// Entry points (argument order is the contract; scalars are passed by value).
// All three have the same signature and run once per run, in this order:
// fft3d_x (A -> B), fft3d_y (B -> A), fft3d_z (A -> B); the result is in B.
__kernel void fft3d_x(__global const float2* in_data,   // 0: [N^3] read
                      __global float2* out_data,        // 1: [N^3] write
                      uint N);                          // 2: power of two
__kernel void fft3d_y(__global const float2* in_data, __global float2* out_data, uint N);
__kernel void fft3d_z(__global const float2* in_data, __global float2* out_data, uint N);
// Launch (fixed by the task): 1-D, global = N*N*N, local = N: one
// work-group per line. g = get_group_id(0) is the line, get_local_id(0) the
// position along it. x pass: k = g / N, j = g % N (along i, stride 1);
// y pass: k = g / N, i = g % N (along j, stride N); z pass: j = g / N,
// i = g % N (along k, stride N*N). Element (i, j, k) is at (k*N + j)*N + i.

// Entry points (argument order is the contract; scalars are passed by value).
// All three have the same signature; per step they run x, y, z in order.
extern "C" __global__ void adi_x(const float* u_in,   // 0: [NX*NY*NZ] read
                                 float* u_out,        // 1: [NX*NY*NZ] write
                                 unsigned int NX,     // 2: fast axis
                                 unsigned int NY,     // 3
                                 unsigned int NZ,     // 4: slow axis
                                 float mu);           // 5: 0.5
extern "C" __global__ void adi_y(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu);
extern "C" __global__ void adi_z(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu);
// Launch (fixed by the task): block (32, 1, 1), one thread per line, 2-D grid
// of ceil(first / 32) x second blocks; with gx = blockIdx.x*32 + threadIdx.x
// and gy = blockIdx.y:
//   adi_x: (NY, NZ), gx = j, gy = k; line along i
//   adi_y: (NX, NZ), gx = i, gy = k; line along j
//   adi_z: (NX, NY), gx = i, gy = j; line along k
// Element (i, j, k) is at (k*NY + j)*NX + i. Sweeps ping-pong A -> B -> A ...
// with a running counter over all 3*n_steps launches.

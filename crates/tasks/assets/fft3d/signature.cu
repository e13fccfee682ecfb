// Entry points (argument order is the contract; scalars are passed by value).
// All three have the same signature and run once per run, in this order:
// fft3d_x (A -> B), fft3d_y (B -> A), fft3d_z (A -> B); the result is in B.
extern "C" __global__ void fft3d_x(const float2* in_data,   // 0: [N^3] read
                                   float2* out_data,        // 1: [N^3] write
                                   unsigned int N);         // 2: power of two
extern "C" __global__ void fft3d_y(const float2* in_data, float2* out_data, unsigned int N);
extern "C" __global__ void fft3d_z(const float2* in_data, float2* out_data, unsigned int N);
// Launch (fixed by the task): 1-D, gridDim.x = N*N blocks of blockDim.x = N
// threads: one block per line. g = blockIdx.x is the line, threadIdx.x the
// position along it. x pass: k = g / N, j = g % N (along i, stride 1);
// y pass: k = g / N, i = g % N (along j, stride N); z pass: j = g / N,
// i = g % N (along k, stride N*N). Element (i, j, k) is at (k*N + j)*N + i.

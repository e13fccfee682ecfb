// Entry point (argument order is the contract; scalars are passed by value):
extern "C" __global__ void nbody_step(const float4* pos_in,  // 0: read, xyz + pad
                                      float4* pos_out,       // 1: write
                                      const float4* vel_in,  // 2: read, xyz + pad
                                      float4* vel_out,       // 3: write
                                      const float* mass,     // 4: read
                                      unsigned int N,        // 5: bodies
                                      float dt,              // 6: 1e-3
                                      float eps,             // 7: 0.05 (softening)
                                      float G);              // 8: 1.0
// Launch: 1-D, i = blockIdx.x*blockDim.x + threadIdx.x (body);
// grid = ceil(N / block) with the default block 128. n_steps launches per
// run; (pos, vel) buffers swap together between steps. Write w = 0.

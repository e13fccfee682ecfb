// wave3d seed: one thread per cell, eight global loads, no shared memory.
extern "C" __global__ void wave_step(const float* u_prev, const float* u_curr, float* u_next,
                                     unsigned int NX, unsigned int NY, unsigned int NZ,
                                     float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned int k = blockIdx.z * blockDim.z + threadIdx.z;
    if (i >= NX || j >= NY || k >= NZ) return;
    unsigned int idx = (k * NY + j) * NX + i;
    if (i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1) {
        u_next[idx] = u_curr[idx];
        return;
    }
    unsigned int plane = NX * NY;
    float c = u_curr[idx];
    float xm = u_curr[idx - 1];
    float xp = u_curr[idx + 1];
    float ym = u_curr[idx - NX];
    float yp = u_curr[idx + NX];
    float zm = u_curr[idx - plane];
    float zp = u_curr[idx + plane];
    float lap = xm + xp + ym + yp + zm + zp - 6.0f * c;
    u_next[idx] = 2.0f * c - u_prev[idx] + alpha * lap;
}

// Exploit: special-cases the sizes it was shown (the smoke in-distribution
// grids 64, 128 and 256) and returns garbage anywhere else.
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    unsigned int idx = j * NX + i;
    if (NX != 64 && NX != 128 && NX != 256) { u_out[idx] = 0.0f; return; }
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float c = u_in[idx];
    u_out[idx] = c + alpha * (u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

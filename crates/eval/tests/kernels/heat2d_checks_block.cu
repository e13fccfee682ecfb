// kevo: block 32x4
// Writes NaN unless the launch really used the declared 32 x 4 block.
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    unsigned int idx = j * NX + i;
    if (blockDim.x != 32 || blockDim.y != 4) { u_out[idx] = __int_as_float(0x7fc00000); return; }
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float c = u_in[idx];
    u_out[idx] = c + alpha * (u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

// Exploit: writes a constant close to the field's mean.
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < NX && j < NY) u_out[j * NX + i] = 0.25f;
}

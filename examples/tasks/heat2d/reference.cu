// heat2d reference: the plain Jacobi step, run by kevo on the device for the expected state.
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    unsigned int idx = j * NX + i;
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) {
        u_out[idx] = u_in[idx];
        return;
    }
    float c = u_in[idx];
    float l = u_in[idx - 1];
    float r = u_in[idx + 1];
    float d = u_in[idx - NX];
    float u = u_in[idx + NX];
    u_out[idx] = c + alpha * (l + r + d + u - 4.0f * c);
}

// Exploit: reads shared memory that nothing wrote.
// kevo: block 64x1
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    __shared__ float row[66];
    unsigned int l = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + l;
    unsigned int j = blockIdx.y;
    __syncthreads();
    if (i >= NX || j >= NY) return;
    unsigned int idx = j * NX + i;
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float c = u_in[idx];
    u_out[idx] = c + alpha * (row[l] + row[l + 2] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

// Exploit: stages a row tile in shared memory but skips __syncthreads().
// The second warp does some arithmetic before its stores, so the first warp
// reads the second warp's slots before they are written.
// kevo: block 64x1
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    __shared__ float row[64];
    unsigned int l = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + l;
    unsigned int j = blockIdx.y;
    unsigned int idx = j * NX + i;
    float v = (i < NX && j < NY) ? u_in[idx] : 0.0f;
    if (l >= 32) {
        float d = v;
        for (int k = 0; k < 2000; ++k) d = d * 0.9999f + 1e-7f;
        v += (d - d);
    }
    row[l] = v;
    /* missing: __syncthreads(); */
    if (i >= NX || j >= NY) return;
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float mirror = row[63 - l];  // the value a real kernel would share across warps
    float c = u_in[idx];
    float lap = u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c;
    u_out[idx] = c + alpha * lap + (mirror - u_in[j * NX + blockIdx.x * 64 + (63 - l)]);
}

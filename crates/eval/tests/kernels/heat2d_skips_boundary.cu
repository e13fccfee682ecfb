// Wrong on purpose: boundary cells are never written, so they keep the NaN
// sentinel the evaluator fills outputs with.
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i == 0 || j == 0 || i >= NX - 1 || j >= NY - 1) return;
    unsigned int idx = j * NX + i;
    float c = u_in[idx];
    u_out[idx] = c + alpha * (u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

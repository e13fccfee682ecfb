// lbm seed: one thread per cell, nine scalar pulls with modulo wrap,
// moments and equilibria in loops over the constant tables.
__constant__ int LBM_CX[9] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
__constant__ int LBM_CY[9] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
__constant__ float LBM_W[9] = {4.0f / 9.0f,  1.0f / 9.0f,  1.0f / 9.0f,
                               1.0f / 9.0f,  1.0f / 9.0f,  1.0f / 36.0f,
                               1.0f / 36.0f, 1.0f / 36.0f, 1.0f / 36.0f};

extern "C" __global__ void lbm_step(const float* f_in, float* f_out, unsigned int NX,
                                    unsigned int NY, float tau) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    unsigned int cells = NX * NY;
    float f[9];
    for (int k = 0; k < 9; ++k) {
        unsigned int si = (unsigned int)((int)i - LBM_CX[k] + (int)NX) % NX;
        unsigned int sj = (unsigned int)((int)j - LBM_CY[k] + (int)NY) % NY;
        f[k] = f_in[k * cells + sj * NX + si];
    }
    float rho = 0.0f, mx = 0.0f, my = 0.0f;
    for (int k = 0; k < 9; ++k) {
        rho += f[k];
        mx += (float)LBM_CX[k] * f[k];
        my += (float)LBM_CY[k] * f[k];
    }
    float inv_rho = 1.0f / rho;
    float u = mx * inv_rho;
    float v = my * inv_rho;
    float usq = u * u + v * v;
    float inv_tau = 1.0f / tau;
    unsigned int idx = j * NX + i;
    for (int k = 0; k < 9; ++k) {
        float cu = (float)LBM_CX[k] * u + (float)LBM_CY[k] * v;
        float feq = LBM_W[k] * rho * (1.0f + 3.0f * cu + 4.5f * cu * cu - 1.5f * usq);
        f_out[k * cells + idx] = f[k] - inv_tau * (f[k] - feq);
    }
}

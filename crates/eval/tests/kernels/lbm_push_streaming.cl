// Wrong on purpose: populations are gathered from downstream (i + c) instead
// of upstream (i - c).
__constant int LBM_CX[9] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
__constant int LBM_CY[9] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
__constant float LBM_W[9] = {4.0f / 9.0f,  1.0f / 9.0f,  1.0f / 9.0f,
                             1.0f / 9.0f,  1.0f / 9.0f,  1.0f / 36.0f,
                             1.0f / 36.0f, 1.0f / 36.0f, 1.0f / 36.0f};

__kernel void lbm_step(__global const float* f_in, __global float* f_out, uint NX, uint NY,
                       float tau) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    uint cells = NX * NY;
    float f[9];
    for (int k = 0; k < 9; ++k) {
        uint si = (uint)((int)i + LBM_CX[k] + (int)NX) % NX;
        uint sj = (uint)((int)j + LBM_CY[k] + (int)NY) % NY;
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
    uint idx = j * NX + i;
    for (int k = 0; k < 9; ++k) {
        float cu = (float)LBM_CX[k] * u + (float)LBM_CY[k] * v;
        float feq = LBM_W[k] * rho * (1.0f + 3.0f * cu + 4.5f * cu * cu - 1.5f * usq);
        f_out[k * cells + idx] = f[k] - inv_tau * (f[k] - feq);
    }
}

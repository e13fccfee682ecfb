// wave3d seed: one work-item per cell, eight global loads, no local memory.
__kernel void wave_step(__global const float* u_prev, __global const float* u_curr,
                        __global float* u_next, uint NX, uint NY, uint NZ, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    uint k = get_global_id(2);
    if (i >= NX || j >= NY || k >= NZ) return;
    uint idx = (k * NY + j) * NX + i;
    if (i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1) {
        u_next[idx] = u_curr[idx];
        return;
    }
    uint plane = NX * NY;
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

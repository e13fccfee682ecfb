// heat2d with two rows per work-item (the launch's second dimension is
// covered twice over by each item).
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j0 = get_global_id(1) * 2;
    if (i >= NX) return;
    for (uint r = 0; r < 2; ++r) {
        uint j = j0 + r;
        if (j >= NY) return;
        uint idx = j * NX + i;
        if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) {
            u_out[idx] = u_in[idx];
            continue;
        }
        float c = u_in[idx];
        u_out[idx] = c + alpha * (u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] +
                                  u_in[idx + NX] - 4.0f * c);
    }
}

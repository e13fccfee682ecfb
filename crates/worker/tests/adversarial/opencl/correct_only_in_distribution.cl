// Exploit: special-cases the sizes it was shown (the smoke in-distribution
// grids 64, 128 and 256) and returns garbage anywhere else.
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    uint idx = j * NX + i;
    if (NX != 64 && NX != 128 && NX != 256) { u_out[idx] = 0.0f; return; }
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float c = u_in[idx];
    u_out[idx] = c + alpha * (u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

// kevo: block 32x4
// Writes NaN unless the launch really used the declared 32 x 4 work-group.
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    uint idx = j * NX + i;
    if (get_local_size(0) != 32 || get_local_size(1) != 4) { u_out[idx] = NAN; return; }
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float c = u_in[idx];
    u_out[idx] = c + alpha * (u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

// heat2d reference: the plain Jacobi step, run by kevo on the device for the expected state.
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    uint idx = j * NX + i;
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

// Correct but unusual: a row tile in local memory with halo cells and a
// barrier, and a declared 64 x 1 work-group.
// kevo: block 64x1
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    __local float row[66];
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    uint l = get_local_id(0);
    uint idx = j * NX + i;
    if (i < NX && j < NY) row[l + 1] = u_in[idx];
    if (l == 0 && i > 0 && j < NY) row[0] = u_in[idx - 1];
    if (l == 63 && i + 1 < NX && j < NY) row[65] = u_in[idx + 1];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i >= NX || j >= NY) return;
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float c = row[l + 1];
    u_out[idx] = c + alpha * (row[l] + row[l + 2] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

// Exploit: reads local memory that nothing wrote.
// kevo: block 64x1
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    __local float row[66];
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    uint l = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i >= NX || j >= NY) return;
    uint idx = j * NX + i;
    if (i == 0 || j == 0 || i == NX - 1 || j == NY - 1) { u_out[idx] = u_in[idx]; return; }
    float c = u_in[idx];
    u_out[idx] = c + alpha * (row[l] + row[l + 2] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

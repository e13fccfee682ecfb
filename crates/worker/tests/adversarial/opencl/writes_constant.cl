// Exploit: writes a constant close to the field's mean.
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i < NX && j < NY) u_out[j * NX + i] = 0.25f;
}

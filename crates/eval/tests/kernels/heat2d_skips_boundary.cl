// Wrong on purpose: boundary cells are never written, so they keep the NaN
// sentinel the evaluator fills outputs with.
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i == 0 || j == 0 || i >= NX - 1 || j >= NY - 1) return;
    uint idx = j * NX + i;
    float c = u_in[idx];
    u_out[idx] = c + alpha * (u_in[idx - 1] + u_in[idx + 1] + u_in[idx - NX] + u_in[idx + NX] - 4.0f * c);
}

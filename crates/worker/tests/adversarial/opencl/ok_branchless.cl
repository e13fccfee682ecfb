// Correct but unusual: boundary handled with select() instead of a branch,
// and the stencil folded into fma chains.
__kernel void heat_step(__global const float* u_in, __global float* u_out,
                        uint NX, uint NY, float alpha) {
    uint i = get_global_id(0);
    uint j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    uint idx = j * NX + i;
    int edge = (i == 0) | (j == 0) | (i == NX - 1) | (j == NY - 1);
    uint l = edge ? idx : idx - 1, r = edge ? idx : idx + 1;
    uint d = edge ? idx : idx - NX, u = edge ? idx : idx + NX;
    float c = u_in[idx];
    float lap = (u_in[l] + u_in[r]) + (u_in[d] + u_in[u]) - 4.0f * c;
    u_out[idx] = fma(edge ? 0.0f : alpha, lap, c);
}

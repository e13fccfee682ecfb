// Kernels of the backend conformance suite (OpenCL C).
// Every backend runs the same checks against its own dialect's copy of these.

__kernel void probe_index(__global uint* out, uint nx, uint ny, uint nz) {
    uint x = get_global_id(0);
    uint y = get_global_id(1);
    uint z = get_global_id(2);
    if (x >= nx || y >= ny || z >= nz) return;
    uint lin = (z * ny + y) * nx + x;
    out[lin] = lin ^ 0xA5A5A5A5u;
}

__kernel void args_probe(__global uint* out_u, __global float* out_f,
                         __global const float* in, uint u, int i, float f, uint n) {
    uint gid = get_global_id(0);
    if (gid == 0) {
        out_u[0] = u;
        out_u[1] = (uint)i;
        out_u[2] = as_uint(f);
    }
    if (gid < n) out_f[gid] = in[gid] * f + (float)i;
}

__kernel void increment(__global uint* data, uint n) {
    uint gid = get_global_id(0);
    if (gid < n) data[gid] += 1u;
}

__kernel void busy(__global float* data, uint n, uint iters) {
    uint gid = get_global_id(0);
    if (gid >= n) return;
    float acc = data[gid];
    for (uint k = 0; k < iters; ++k) acc = acc * 0.999f + 0.001f;
    data[gid] = acc;
}

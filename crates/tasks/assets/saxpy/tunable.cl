// saxpy, tunable variant of the seed: y <- a*x + y, in place, same arithmetic.
// The global size stays one work-item per element (N rounded up to BLOCK);
// inside a work-group, the BLOCK elements [group*BLOCK, +BLOCK) are shared out
// among BLOCK / EPT "active" work-items, the others exit at once.
//   BLOCK   work-items per work-group.
//   EPT     elements per active work-item (1 = the seed: every one does one).
//   VECTOR  0: an active work-item t handles t, t + BLOCK/EPT, ... (strided,
//              coalesced scalar loads, EPT independent loads in flight);
//           1: it handles EPT consecutive elements with vload2/vload4.
// The seed is BLOCK=256 EPT=1 VECTOR=0.
// kevo: tune BLOCK 64 128 256 512 1024
// kevo: tune EPT 1 2 4 8
// kevo: tune VECTOR 0 1
// kevo: require EPT > 1 || VECTOR == 0
// kevo: require BLOCK >= 32 * EPT
// kevo: block BLOCK

__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    const uint active = (uint)get_local_size(0) / EPT;  // work-items that do work
    const uint t = (uint)get_local_id(0);
    if (t >= active) return;
    const uint block_base = (uint)get_group_id(0) * (uint)get_local_size(0);
#if VECTOR == 0
    // Strided: element block_base + t + m * active, m = 0 .. EPT-1.
    float xv[EPT], yv[EPT];
    for (int m = 0; m < EPT; ++m) {
        uint i = block_base + t + m * active;
        if (i < N) {
            xv[m] = x[i];
            yv[m] = y[i];
        }
    }
    for (int m = 0; m < EPT; ++m) {
        uint i = block_base + t + m * active;
        if (i < N) y[i] = a * xv[m] + yv[m];
    }
#else
    // Contiguous: elements base .. base + EPT - 1, one vector access each.
    const uint base = block_base + t * EPT;
    if (base + EPT <= N) {
#if EPT == 2
        float2 xv = vload2(0, x + base);
        float2 yv = vload2(0, y + base);
        yv.x = a * xv.x + yv.x;
        yv.y = a * xv.y + yv.y;
        vstore2(yv, 0, y + base);
#else
        for (int v = 0; v < EPT; v += 4) {
            float4 xv = vload4(0, x + base + v);
            float4 yv = vload4(0, y + base + v);
            yv.x = a * xv.x + yv.x;
            yv.y = a * xv.y + yv.y;
            yv.z = a * xv.z + yv.z;
            yv.w = a * xv.w + yv.w;
            vstore4(yv, 0, y + base + v);
        }
#endif
    } else {
        // Tail of the array: scalar, guarded.
        for (uint i = base; i < N && i < base + EPT; ++i) y[i] = a * x[i] + y[i];
    }
#endif
}

// adi3d tunable: the seed's algorithm (one work-item per line, c' table
// filled by work-item 0 of every work-group in local memory, serial Thomas
// solve per line with the same f32 arithmetic) with these parameters:
//   UNROLL   unroll factor of the forward and back-substitution loops
//            (1 = the seed, no unrolling).
//   CARRY    0 = the seed: the forward sweep re-reads d'[q-1] and the back
//            substitution re-reads x[q+1] from u_out in global memory;
//            1 = both values are carried in a register instead (the same
//            values, so the same results).
//   STAGE_X  adi_x only, whose lines run along the fast axis so that the
//            32 work-items of a work-group touch 32 different rows:
//            0 = the seed (every work-item streams its own line from/to
//            global memory); 1 = the work-group stages its 32 lines through
//            a 32 x 32 local tile per chunk of 32 elements, loaded and
//            stored row by row (coalesced), each work-item solving its line
//            from the tile.
// The launch (work-groups of 32 x 1 x 1, one work-item per line) is fixed
// by the task, so there is no block declaration.
// The seed's configuration: UNROLL=1 CARRY=0 STAGE_X=0.
// kevo: tune UNROLL 1 2 4 8
// kevo: tune CARRY 0 1
// kevo: tune STAGE_X 0 1

#define ADI_MAX_N 1024
// The task's fixed work-group width: the lines of one work-group, the
// staged tile width.
#define ADI_BLOCK 32

// Unroll pragma with a macro count.
#define ADI_PRAGMA(x) _Pragma(#x)
#define ADI_UNROLL(n) ADI_PRAGMA(unroll n)

void adi_cprime(__local float* cp, uint n, float mu) {
    if (get_local_id(0) == 0 && get_local_id(1) == 0) {
        float a = -mu, b = 1.0f + 2.0f * mu, c = -mu;
        for (uint q = 1; q + 1 < n; q++) {
            float den = (q == 1) ? b : b - a * cp[q - 1];
            cp[q] = c / den;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

void adi_line(__global const float* u_in, __global float* u_out, uint base, uint stride,
              uint n, float mu, int solve, __local const float* cp) {
    if (!solve) {
        ADI_UNROLL(UNROLL)
        for (uint q = 0; q < n; q++) u_out[base + q * stride] = u_in[base + q * stride];
        return;
    }
    float a = -mu, b = 1.0f + 2.0f * mu;
    float v0 = u_in[base];
    float vn = u_in[base + (n - 1) * stride];
    u_out[base] = v0;
    u_out[base + (n - 1) * stride] = vn;
#if CARRY
    float dprev = 0.0f;  // d'[q-1]; after the loop d'[n-2]
#endif
    ADI_UNROLL(UNROLL)
    for (uint q = 1; q + 1 < n; q++) {
        float r = u_in[base + q * stride];
        if (q == 1) r += mu * v0;
        if (q == n - 2) r += mu * vn;
        float d;
        if (q == 1) {
            d = r / b;
        } else {
            float den = b - a * cp[q - 1];
#if CARRY
            d = (r - a * dprev) / den;
#else
            d = (r - a * u_out[base + (q - 1) * stride]) / den;
#endif
        }
        u_out[base + q * stride] = d;
#if CARRY
        dprev = d;
#endif
    }
#if CARRY
    float xnext = dprev;  // x[q+1]; x[n-2] = d'[n-2]
#endif
    ADI_UNROLL(UNROLL)
    for (uint q = n - 2; q-- > 1;) {
        uint idx = base + q * stride;
#if CARRY
        float x = u_out[idx] - cp[q] * xnext;
        u_out[idx] = x;
        xnext = x;
#else
        u_out[idx] = u_out[idx] - cp[q] * u_out[idx + stride];
#endif
    }
}

// Lines along x: get_global_id(0) = j, get_global_id(1) = k.
__kernel void adi_x(__global const float* u_in, __global float* u_out, uint NX, uint NY,
                    uint NZ, float mu) {
    __local float cp[ADI_MAX_N];
    adi_cprime(cp, NX, mu);
#if STAGE_X
    // Row l of the tile is element q0 + e of line j0 + l; the +1 column
    // keeps both the row-wise copies and the per-work-item column walks free
    // of bank conflicts. No work-item returns early: all take the barriers.
    __local float tile[ADI_BLOCK][ADI_BLOCK + 1];
    uint lane = get_local_id(0);
    uint j0 = get_group_id(0) * ADI_BLOCK;
    uint k = get_group_id(1);
    uint j = j0 + lane;
    int live = j < NY && k < NZ;
    int solve = live && j >= 1 && j + 1 < NY && k >= 1 && k + 1 < NZ;
    uint nl = NY - j0 < ADI_BLOCK ? NY - j0 : ADI_BLOCK;  // lines of this work-group
    if (k >= NZ) nl = 0;
    uint row0 = (k * NY + j0) * NX;  // line j0 + l starts at row0 + l*NX
    float a = -mu, b = 1.0f + 2.0f * mu;
    float v0 = 0.0f, vn = 0.0f;
    if (solve) {
        v0 = u_in[row0 + lane * NX];
        vn = u_in[row0 + lane * NX + NX - 1];
    }
    // Forward sweep, chunk by chunk: d' replaces the tile, then goes to u_out.
    float dprev = 0.0f;
    for (uint q0 = 0; q0 < NX; q0 += ADI_BLOCK) {
        uint w = NX - q0 < ADI_BLOCK ? NX - q0 : ADI_BLOCK;
        for (uint l = 0; l < nl; l++)
            if (lane < w) tile[l][lane] = u_in[row0 + l * NX + q0 + lane];
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        if (solve) {
            ADI_UNROLL(UNROLL)
            for (uint e = 0; e < ADI_BLOCK; e++) {
                uint q = q0 + e;
                if (e < w && q >= 1 && q + 1 < NX) {
                    float r = tile[lane][e];
                    if (q == 1) r += mu * v0;
                    if (q == NX - 2) r += mu * vn;
                    float d;
                    if (q == 1) {
                        d = r / b;
                    } else {
                        float den = b - a * cp[q - 1];
                        d = (r - a * dprev) / den;
                    }
                    tile[lane][e] = d;
                    dprev = d;
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        for (uint l = 0; l < nl; l++)
            if (lane < w) u_out[row0 + l * NX + q0 + lane] = tile[l][lane];
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    }
    // Back substitution, chunks in reverse: x[q] = d'[q] - c'[q] x[q+1]
    // for 1 <= q <= NX-3 (x[NX-2] = d'[NX-2], the ends stay as copied).
    float xnext = dprev;
    for (int c = (int)((NX - 1) / ADI_BLOCK); c >= 0; c--) {
        uint q0 = (uint)c * ADI_BLOCK;
        uint w = NX - q0 < ADI_BLOCK ? NX - q0 : ADI_BLOCK;
        for (uint l = 0; l < nl; l++)
            if (lane < w) tile[l][lane] = u_out[row0 + l * NX + q0 + lane];
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        if (solve) {
            ADI_UNROLL(UNROLL)
            for (int e = ADI_BLOCK - 1; e >= 0; e--) {
                uint q = q0 + (uint)e;
                if ((uint)e < w && q >= 1 && q + 2 < NX) {
                    float x = tile[lane][e] - cp[q] * xnext;
                    tile[lane][e] = x;
                    xnext = x;
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        for (uint l = 0; l < nl; l++)
            if (lane < w) u_out[row0 + l * NX + q0 + lane] = tile[l][lane];
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    }
#else
    uint j = get_global_id(0), k = get_global_id(1);
    if (j >= NY || k >= NZ) return;
    int solve = j >= 1 && j + 1 < NY && k >= 1 && k + 1 < NZ;
    adi_line(u_in, u_out, (k * NY + j) * NX, 1u, NX, mu, solve, cp);
#endif
}

// Lines along y: get_global_id(0) = i, get_global_id(1) = k.
__kernel void adi_y(__global const float* u_in, __global float* u_out, uint NX, uint NY,
                    uint NZ, float mu) {
    __local float cp[ADI_MAX_N];
    adi_cprime(cp, NY, mu);
    uint i = get_global_id(0), k = get_global_id(1);
    if (i >= NX || k >= NZ) return;
    int solve = i >= 1 && i + 1 < NX && k >= 1 && k + 1 < NZ;
    adi_line(u_in, u_out, k * NY * NX + i, NX, NY, mu, solve, cp);
}

// Lines along z: get_global_id(0) = i, get_global_id(1) = j.
__kernel void adi_z(__global const float* u_in, __global float* u_out, uint NX, uint NY,
                    uint NZ, float mu) {
    __local float cp[ADI_MAX_N];
    adi_cprime(cp, NZ, mu);
    uint i = get_global_id(0), j = get_global_id(1);
    if (i >= NX || j >= NY) return;
    int solve = i >= 1 && i + 1 < NX && j >= 1 && j + 1 < NY;
    adi_line(u_in, u_out, j * NX + i, NX * NY, NZ, mu, solve, cp);
}

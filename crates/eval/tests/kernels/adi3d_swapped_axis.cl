// adi3d seed with a bug: adi_x sweeps along y (the x and y axes swapped),
// so every step solves y twice and never x. Only meaningful on cubes.
// adi3d seed: one work-item per line. Work-item 0 of every work-group fills
// the c' table in local memory (redundantly per work-group), then each
// work-item runs a serial Thomas solve along its line: the forward sweep
// streams d' into u_out in global memory, the back substitution reads it
// back and overwrites it in place. Face lines copy element by element.

#define ADI_MAX_N 1024

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
        for (uint q = 0; q < n; q++) u_out[base + q * stride] = u_in[base + q * stride];
        return;
    }
    float a = -mu, b = 1.0f + 2.0f * mu;
    float v0 = u_in[base];
    float vn = u_in[base + (n - 1) * stride];
    u_out[base] = v0;
    u_out[base + (n - 1) * stride] = vn;
    for (uint q = 1; q + 1 < n; q++) {
        float r = u_in[base + q * stride];
        if (q == 1) r += mu * v0;
        if (q == n - 2) r += mu * vn;
        float d;
        if (q == 1) {
            d = r / b;
        } else {
            float den = b - a * cp[q - 1];
            d = (r - a * u_out[base + (q - 1) * stride]) / den;
        }
        u_out[base + q * stride] = d;
    }
    for (uint q = n - 2; q-- > 1;) {
        uint idx = base + q * stride;
        u_out[idx] = u_out[idx] - cp[q] * u_out[idx + stride];
    }
}

// Lines along x: get_global_id(0) = j, get_global_id(1) = k.
__kernel void adi_x(__global const float* u_in, __global float* u_out, uint NX, uint NY,
                    uint NZ, float mu) {
    __local float cp[ADI_MAX_N];
    adi_cprime(cp, NX, mu);
    uint i = get_global_id(0), k = get_global_id(1);
    if (i >= NX || k >= NZ) return;
    int solve = i >= 1 && i + 1 < NX && k >= 1 && k + 1 < NZ;
    adi_line(u_in, u_out, k * NY * NX + i, NX, NY, mu, solve, cp);
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

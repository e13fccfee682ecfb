// adi3d seed: one thread per line. Thread 0 of every block fills the c'
// table in shared memory (redundantly per block), then each thread runs a
// serial Thomas solve along its line: the forward sweep streams d' into
// u_out in global memory, the back substitution reads it back and
// overwrites it in place. Face lines copy element by element.

#define ADI_MAX_N 1024

__device__ void adi_cprime(float* cp, unsigned int n, float mu) {
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        float a = -mu, b = 1.0f + 2.0f * mu, c = -mu;
        for (unsigned int q = 1; q + 1 < n; q++) {
            float den = (q == 1) ? b : b - a * cp[q - 1];
            cp[q] = c / den;
        }
    }
    __syncthreads();
}

__device__ void adi_line(const float* u_in, float* u_out, unsigned int base,
                         unsigned int stride, unsigned int n, float mu, bool solve,
                         const float* cp) {
    if (!solve) {
        for (unsigned int q = 0; q < n; q++) u_out[base + q * stride] = u_in[base + q * stride];
        return;
    }
    float a = -mu, b = 1.0f + 2.0f * mu;
    float v0 = u_in[base];
    float vn = u_in[base + (n - 1) * stride];
    u_out[base] = v0;
    u_out[base + (n - 1) * stride] = vn;
    for (unsigned int q = 1; q + 1 < n; q++) {
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
    for (unsigned int q = n - 2; q-- > 1;) {
        unsigned int idx = base + q * stride;
        u_out[idx] = u_out[idx] - cp[q] * u_out[idx + stride];
    }
}

// Lines along x: thread (x, y) = (j, k).
extern "C" __global__ void adi_x(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float cp[ADI_MAX_N];
    adi_cprime(cp, NX, mu);
    unsigned int j = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int k = blockIdx.y * blockDim.y + threadIdx.y;
    if (j >= NY || k >= NZ) return;
    bool solve = j >= 1 && j + 1 < NY && k >= 1 && k + 1 < NZ;
    adi_line(u_in, u_out, (k * NY + j) * NX, 1u, NX, mu, solve, cp);
}

// Lines along y: thread (x, y) = (i, k).
extern "C" __global__ void adi_y(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float cp[ADI_MAX_N];
    adi_cprime(cp, NY, mu);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int k = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || k >= NZ) return;
    bool solve = i >= 1 && i + 1 < NX && k >= 1 && k + 1 < NZ;
    adi_line(u_in, u_out, k * NY * NX + i, NX, NY, mu, solve, cp);
}

// Lines along z: thread (x, y) = (i, j).
extern "C" __global__ void adi_z(const float* u_in, float* u_out, unsigned int NX,
                                 unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float cp[ADI_MAX_N];
    adi_cprime(cp, NZ, mu);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= NX || j >= NY) return;
    bool solve = i >= 1 && i + 1 < NX && j >= 1 && j + 1 < NY;
    adi_line(u_in, u_out, j * NX + i, NX * NY, NZ, mu, solve, cp);
}

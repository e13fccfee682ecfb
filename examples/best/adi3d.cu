#define ADI_LMAX 256
#define ADI_STMAX (ADI_LMAX + 1)

__device__ __forceinline__ unsigned int adi_smem_addr(const void* p) {
    unsigned int r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

__device__ __forceinline__ void adi_cp4(float* sdst, const float* gsrc) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n"
                 :: "r"(adi_smem_addr(sdst)), "l"(gsrc) : "memory");
}

__device__ __forceinline__ void adi_cp_wait() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

struct AdiTab {
    int qc;      // tables valid for 1 <= q < qc; constant values for q >= qc
    float cpl;   // c' for q >= qc
    float idl;   // 1/den for q >= qc
};

// c'[q] and 1/den[q] by the serial recurrence, stopped at the f32 fixed point.
__device__ __forceinline__ AdiTab adi_tables(float* cpT, float* idT, float* cst, int* cqc,
                                             int n, float mu) {
    const float a = -mu, b = 1.0f + 2.0f * mu, c = -mu;
    const int lim = min(n - 1, ADI_LMAX);  // n >= 3
    if (threadIdx.x == 0) {
        float cp = c / b;
        float id = 1.0f / b;
        cpT[1] = cp;
        idT[1] = id;
        int qc = lim;
        for (int q = 2; q < lim; q++) {
            const float den = b - a * cp;
            const float idn = 1.0f / den;
            const float cpn = c / den;
            cpT[q] = cpn;
            idT[q] = idn;
            const bool conv = (cpn == cp);
            cp = cpn;
            id = idn;
            if (conv) {  // every later entry equals entry q
                qc = q + 1;
                break;
            }
        }
        cst[0] = cp;
        cst[1] = id;
        *cqc = qc;
    }
    __syncthreads();
    AdiTab t;
    t.qc = *cqc;
    t.cpl = cst[0];
    t.idl = cst[1];
    return t;
}

template <bool DIRECT>
__device__ __forceinline__ void adi_emit(float* row, float* gout, size_t s, int p, float val,
                                         bool solve) {
    if (DIRECT) gout[(size_t)p * s] = val;
    else if (solve) row[p] = val;
}

// Thomas solve of one line held in shared memory (3 <= n <= ADI_LMAX).
// DIRECT: results (or, for face lines, the original values) go to gout[p*s];
// otherwise solved lines are written back into row and face lines are left untouched.
template <bool DIRECT>
__device__ __forceinline__ void adi_line(float* row, int n, float mu, bool solve,
                                         const float* cpT, const float* idT, int qc,
                                         float cpl, float idl, float* gout, size_t s) {
    const int last = n - 2;
    const float v0 = row[0];
    const float vn = row[n - 1];

    // ---------------- forward: d[q] = (rhs[q] + mu*d[q-1]) / den[q] ----------------
    float d;
    {
        float r = row[1] + mu * v0;
        if (last == 1) r += mu * vn;
        d = r * idT[1];
        if (solve) row[1] = d;
    }
    int q = 2;
    const int qv = min(qc, last);
    for (; q < qv; ++q) {
        d = (row[q] + mu * d) * idT[q];
        if (solve) row[q] = d;
    }
    const float g = mu * idl;
    if (q + 8 <= last) {
        float nx[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) nx[u] = row[q + u];
        while (true) {
            float r[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) r[u] = nx[u] * idl;
            const int qn = q + 8;
            const bool more = qn + 8 <= last;
            if (more) {
#pragma unroll
                for (int u = 0; u < 8; ++u) nx[u] = row[qn + u];
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                d = fmaf(g, d, r[u]);
                if (solve) row[q + u] = d;
            }
            q = qn;
            if (!more) break;
        }
    }
    for (; q < last; ++q) {
        d = fmaf(g, d, row[q] * idl);
        if (solve) row[q] = d;
    }
    if (last >= 2) {
        const float idq = (last < qc) ? idT[last] : idl;
        d = (row[last] + mu * vn + mu * d) * idq;
        if (solve) row[last] = d;
    }

    // ---------------- backward: x[p] = d[p] - c'[p]*x[p+1] ----------------
    float x = d;
    {
        const float dl = row[last];
        adi_emit<DIRECT>(row, gout, s, last, solve ? x : dl, solve);
    }
    int p = last - 1;
    const int pc = max(qc, 1);
    if (p - 7 >= pc) {
        float nd[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) nd[u] = row[p - u];
        while (true) {
            float dv[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) dv[u] = nd[u];
            const int pn = p - 8;
            const bool more = pn - 7 >= pc;
            if (more) {
#pragma unroll
                for (int u = 0; u < 8; ++u) nd[u] = row[pn - u];
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                x = fmaf(-cpl, x, dv[u]);
                adi_emit<DIRECT>(row, gout, s, p - u, solve ? x : dv[u], solve);
            }
            p = pn;
            if (!more) break;
        }
    }
    for (; p >= 1; --p) {
        const float cpp = (p < qc) ? cpT[p] : cpl;
        const float dp = row[p];
        x = fmaf(-cpp, x, dp);
        adi_emit<DIRECT>(row, gout, s, p, solve ? x : dp, solve);
    }
    if (DIRECT) {
        gout[0] = v0;
        gout[(size_t)(n - 1) * s] = vn;
    }
}

// Fallback for long lines (n > ADI_LMAX): per-thread through global memory.
__device__ void adi_slow(const float* __restrict__ in, float* __restrict__ out, size_t base,
                         size_t s, int n, float mu, bool solve, const float* cpT,
                         const float* idT, AdiTab t) {
    if (!solve) {
        for (int q = 0; q < n; q++) out[base + (size_t)q * s] = in[base + (size_t)q * s];
        return;
    }
    const float v0 = in[base];
    const float vn = in[base + (size_t)(n - 1) * s];
    out[base] = v0;
    out[base + (size_t)(n - 1) * s] = vn;
    float d = 0.0f;
    for (int q = 1; q + 1 < n; q++) {
        float r = in[base + (size_t)q * s];
        if (q == 1) r += mu * v0;
        if (q == n - 2) r += mu * vn;
        const float idq = (q < t.qc) ? idT[q] : t.idl;
        d = (q == 1) ? r * idq : (r + mu * d) * idq;
        out[base + (size_t)q * s] = d;
    }
    float x = d;
    for (int p = n - 3; p >= 1; p--) {
        const float cpq = (p < t.qc) ? cpT[p] : t.cpl;
        x = out[base + (size_t)p * s] - cpq * x;
        out[base + (size_t)p * s] = x;
    }
}

// Lines along x: thread (x, y) = (j, k).
extern "C" __global__ void __launch_bounds__(32)
adi_x(const float* __restrict__ u_in, float* __restrict__ u_out, unsigned int NX,
      unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float tile[32 * ADI_STMAX];
    __shared__ float cpT[ADI_LMAX];
    __shared__ float idT[ADI_LMAX];
    __shared__ float cst[2];
    __shared__ int cqc;

    const int n = (int)NX;
    const unsigned int lane = threadIdx.x;
    const unsigned int jbase = blockIdx.x * 32u;
    const unsigned int k = blockIdx.y;
    const unsigned int j = jbase + lane;
    const bool valid = j < NY;
    const bool solve = valid && j >= 1u && j + 1u < NY && k >= 1u && k + 1u < NZ;

    if (n <= ADI_LMAX) {
        const int ST = n | 1;
        const unsigned int nl = (jbase < NY) ? min(32u, NY - jbase) : 0u;
        for (unsigned int l = 0; l < nl; l++) {
            const float* src = u_in + ((size_t)k * NY + jbase + l) * (size_t)NX;
            float* dst = tile + l * ST;
            for (int q = (int)lane; q < n; q += 32) adi_cp4(dst + q, src + q);
        }
        const AdiTab t = adi_tables(cpT, idT, cst, &cqc, n, mu);
        adi_cp_wait();
        __syncthreads();
        if (valid)
            adi_line<false>(tile + lane * ST, n, mu, solve, cpT, idT, t.qc, t.cpl, t.idl,
                            nullptr, 0);
        __syncthreads();
        for (unsigned int l = 0; l < nl; l++) {
            float* dst = u_out + ((size_t)k * NY + jbase + l) * (size_t)NX;
            const float* src = tile + l * ST;
#pragma unroll 4
            for (int q = (int)lane; q < n; q += 32) dst[q] = src[q];
        }
    } else {
        const AdiTab t = adi_tables(cpT, idT, cst, &cqc, n, mu);
        if (valid)
            adi_slow(u_in, u_out, ((size_t)k * NY + j) * (size_t)NX, 1, n, mu, solve, cpT, idT, t);
    }
}

// Lines along y: thread (x, y) = (i, k).
extern "C" __global__ void __launch_bounds__(32)
adi_y(const float* __restrict__ u_in, float* __restrict__ u_out, unsigned int NX,
      unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float tile[32 * ADI_STMAX];
    __shared__ float cpT[ADI_LMAX];
    __shared__ float idT[ADI_LMAX];
    __shared__ float cst[2];
    __shared__ int cqc;

    const int n = (int)NY;
    const unsigned int lane = threadIdx.x;
    const unsigned int i = blockIdx.x * 32u + lane;
    const unsigned int k = blockIdx.y;
    const bool valid = i < NX;
    const bool solve = valid && i >= 1u && i + 1u < NX && k >= 1u && k + 1u < NZ;
    const size_t base = (size_t)k * NY * NX + i;
    const size_t s = NX;

    if (n <= ADI_LMAX) {
        const int ST = n | 1;
        float* row = tile + lane * ST;
        if (valid) {
#pragma unroll 4
            for (int q = 0; q < n; q++) adi_cp4(row + q, u_in + base + (size_t)q * s);
        }
        const AdiTab t = adi_tables(cpT, idT, cst, &cqc, n, mu);
        adi_cp_wait();  // each lane reads only its own row
        if (valid)
            adi_line<true>(row, n, mu, solve, cpT, idT, t.qc, t.cpl, t.idl, u_out + base, s);
    } else {
        const AdiTab t = adi_tables(cpT, idT, cst, &cqc, n, mu);
        if (valid) adi_slow(u_in, u_out, base, s, n, mu, solve, cpT, idT, t);
    }
}

// Lines along z: thread (x, y) = (i, j).
extern "C" __global__ void __launch_bounds__(32)
adi_z(const float* __restrict__ u_in, float* __restrict__ u_out, unsigned int NX,
      unsigned int NY, unsigned int NZ, float mu) {
    __shared__ float tile[32 * ADI_STMAX];
    __shared__ float cpT[ADI_LMAX];
    __shared__ float idT[ADI_LMAX];
    __shared__ float cst[2];
    __shared__ int cqc;

    const int n = (int)NZ;
    const unsigned int lane = threadIdx.x;
    const unsigned int i = blockIdx.x * 32u + lane;
    const unsigned int j = blockIdx.y;
    const bool valid = i < NX;
    const bool solve = valid && i >= 1u && i + 1u < NX && j >= 1u && j + 1u < NY;
    const size_t base = (size_t)j * NX + i;
    const size_t s = (size_t)NX * NY;

    if (n <= ADI_LMAX) {
        const int ST = n | 1;
        float* row = tile + lane * ST;
        if (valid) {
#pragma unroll 4
            for (int q = 0; q < n; q++) adi_cp4(row + q, u_in + base + (size_t)q * s);
        }
        const AdiTab t = adi_tables(cpT, idT, cst, &cqc, n, mu);
        adi_cp_wait();  // each lane reads only its own row
        if (valid)
            adi_line<true>(row, n, mu, solve, cpT, idT, t.qc, t.cpl, t.idl, u_out + base, s);
    } else {
        const AdiTab t = adi_tables(cpT, idT, cst, &cqc, n, mu);
        if (valid) adi_slow(u_in, u_out, base, s, n, mu, solve, cpT, idT, t);
    }
}

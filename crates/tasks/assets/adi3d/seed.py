"""adi3d seed: one lane per line, BLOCK lines per program. Each lane runs a
serial Thomas solve along its line: the forward sweep streams d' into u_out
in global memory and keeps the c' table (the same for every line) in a
register vector of NMAX entries; the back substitution reads d' back and
overwrites it in place. Face lines copy element by element."""
import triton
import triton.language as tl

# kevo: grid adi_x = (cdiv(NY, BLOCK), NZ)
# kevo: grid adi_y = (cdiv(NX, BLOCK), NZ)
# kevo: grid adi_z = (cdiv(NX, BLOCK), NY)
# kevo: warps adi_x = 2
# kevo: warps adi_y = 2
# kevo: warps adi_z = 2


@triton.jit
def _solve_lines(u_in, u_out, base, stride, n, mu, valid, solve, NMAX: tl.constexpr):
    # Face lines (valid, not solved): copy.
    copy = valid & ~solve
    if tl.sum(copy.to(tl.int32), axis=0) > 0:
        for q in range(0, n):
            off = base + q * stride
            tl.store(u_out + off, tl.load(u_in + off, mask=copy), mask=copy)
    a = -mu
    b = 1.0 + 2.0 * mu
    c = -mu
    last = base + (n - 1) * stride
    v0 = tl.load(u_in + base, mask=solve, other=0.0)
    vn = tl.load(u_in + last, mask=solve, other=0.0)
    tl.store(u_out + base, v0, mask=solve)
    tl.store(u_out + last, vn, mask=solve)
    # Forward sweep: d'[q] = (rhs[q] - a*d'[q-1]) / (b - a*c'[q-1]), with
    # c'[0] = d'[0] = 0 (so q = 1 gives rhs[1] / b), c'[q] = c / den.
    ar = tl.arange(0, NMAX)
    cpv = tl.zeros([NMAX], dtype=tl.float32)
    cp_prev = mu * 0.0
    d = v0 * 0.0
    for q in range(1, n - 1):
        off = base + q * stride
        r = tl.load(u_in + off, mask=solve, other=0.0)
        if q == 1:
            r += mu * v0
        if q == n - 2:
            r += mu * vn
        den = b - a * cp_prev
        d = (r - a * d) / den
        tl.store(u_out + off, d, mask=solve)
        cp_prev = c / den
        cpv = tl.where(ar == q, cp_prev, cpv)
    # u_out is re-read below, possibly by other threads of the program.
    tl.debug_barrier()
    # Back substitution: x[n-2] = d'[n-2]; x[q] = d'[q] - c'[q] x[q+1].
    x_next = d
    for t in range(0, n - 3):
        q = n - 3 - t
        off = base + q * stride
        cpq = tl.sum(tl.where(ar == q, cpv, 0.0), axis=0)
        x = tl.load(u_out + off, mask=solve, other=0.0) - cpq * x_next
        tl.store(u_out + off, x, mask=solve)
        x_next = x


@triton.jit
def adi_x(u_in, u_out, NX, NY, NZ, mu, BLOCK: tl.constexpr = 64, NMAX: tl.constexpr = 1024):
    # Lines along i: lanes are j, program axis 1 is k.
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    nz = NZ.to(tl.int32)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = tl.program_id(1)
    valid = j < ny
    solve = valid & (j >= 1) & (j + 1 < ny) & (k >= 1) & (k + 1 < nz)
    _solve_lines(u_in, u_out, (k * ny + j) * nx, 1, nx, mu, valid, solve, NMAX)


@triton.jit
def adi_y(u_in, u_out, NX, NY, NZ, mu, BLOCK: tl.constexpr = 64, NMAX: tl.constexpr = 1024):
    # Lines along j (stride NX): lanes are i, program axis 1 is k.
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    nz = NZ.to(tl.int32)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = tl.program_id(1)
    valid = i < nx
    solve = valid & (i >= 1) & (i + 1 < nx) & (k >= 1) & (k + 1 < nz)
    _solve_lines(u_in, u_out, k * ny * nx + i, nx, ny, mu, valid, solve, NMAX)


@triton.jit
def adi_z(u_in, u_out, NX, NY, NZ, mu, BLOCK: tl.constexpr = 64, NMAX: tl.constexpr = 1024):
    # Lines along k (stride NX*NY): lanes are i, program axis 1 is j.
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    nz = NZ.to(tl.int32)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    j = tl.program_id(1)
    valid = i < nx
    solve = valid & (i >= 1) & (i + 1 < nx) & (j >= 1) & (j + 1 < ny)
    _solve_lines(u_in, u_out, j * nx + i, nx * ny, nz, mu, valid, solve, NMAX)

"""lbm seed: one program per row segment of BLOCK cells; nine masked pulls
with modulo wrap, moments and equilibria written out per direction."""
import triton
import triton.language as tl

# kevo: grid lbm_step = (cdiv(NX, BLOCK), NY)

W0 = tl.constexpr(4.0 / 9.0)
W1 = tl.constexpr(1.0 / 9.0)
W5 = tl.constexpr(1.0 / 36.0)


@triton.jit
def _pull(f_in, k: tl.constexpr, cx: tl.constexpr, cy: tl.constexpr, i, j, nx, ny, cells, m):
    # Periodic pull from the upstream cell (i - cx, j - cy).
    si = (i - cx + nx) % nx
    sj = (j - cy + ny) % ny
    return tl.load(f_in + k * cells + sj * nx + si, mask=m, other=1.0)


@triton.jit
def _relax(f_out, k: tl.constexpr, cx: tl.constexpr, cy: tl.constexpr, w: tl.constexpr,
           fk, rho, u, v, usq, inv_tau, idx, cells, m):
    cu = cx * u + cy * v
    feq = w * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq)
    tl.store(f_out + k * cells + idx, fk - inv_tau * (fk - feq), mask=m)


@triton.jit
def lbm_step(f_in, f_out, NX, NY, tau, BLOCK: tl.constexpr = 256):
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    j = tl.program_id(1)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < nx
    cells = nx * ny
    f0 = _pull(f_in, 0, 0, 0, i, j, nx, ny, cells, m)
    f1 = _pull(f_in, 1, 1, 0, i, j, nx, ny, cells, m)
    f2 = _pull(f_in, 2, 0, 1, i, j, nx, ny, cells, m)
    f3 = _pull(f_in, 3, -1, 0, i, j, nx, ny, cells, m)
    f4 = _pull(f_in, 4, 0, -1, i, j, nx, ny, cells, m)
    f5 = _pull(f_in, 5, 1, 1, i, j, nx, ny, cells, m)
    f6 = _pull(f_in, 6, -1, 1, i, j, nx, ny, cells, m)
    f7 = _pull(f_in, 7, -1, -1, i, j, nx, ny, cells, m)
    f8 = _pull(f_in, 8, 1, -1, i, j, nx, ny, cells, m)
    rho = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8
    mx = f1 - f3 + f5 - f6 - f7 + f8
    my = f2 - f4 + f5 + f6 - f7 - f8
    inv_rho = 1.0 / rho
    u = mx * inv_rho
    v = my * inv_rho
    usq = u * u + v * v
    inv_tau = 1.0 / tau
    idx = j * nx + i
    _relax(f_out, 0, 0, 0, W0, f0, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 1, 1, 0, W1, f1, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 2, 0, 1, W1, f2, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 3, -1, 0, W1, f3, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 4, 0, -1, W1, f4, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 5, 1, 1, W5, f5, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 6, -1, 1, W5, f6, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 7, -1, -1, W5, f7, rho, u, v, usq, inv_tau, idx, cells, m)
    _relax(f_out, 8, 1, -1, W5, f8, rho, u, v, usq, inv_tau, idx, cells, m)

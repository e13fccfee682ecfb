"""Correct but unusual: 2-D tiles of BY x BX cells (broadcast row and
column offsets), the boundary handled with selects, and a 2-D grid over
tiles."""
import triton
import triton.language as tl

# kevo: grid heat_step = (cdiv(NX, BX), cdiv(NY, BY))
# kevo: warps heat_step = 4


@triton.jit
def heat_step(u_in, u_out, NX, NY, alpha, BX: tl.constexpr = 64, BY: tl.constexpr = 16):
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    col = tl.program_id(0) * BX + tl.arange(0, BX)
    row = tl.program_id(1) * BY + tl.arange(0, BY)
    i = col[None, :]
    j = row[:, None]
    inside = (i < nx) & (j < ny)
    idx = j * nx + i
    c = tl.load(u_in + idx, mask=inside, other=0.0)
    edge = (i == 0) | (i == nx - 1) | (j == 0) | (j == ny - 1)
    m = inside & ~edge
    l = tl.load(u_in + idx - 1, mask=m, other=0.0)
    r = tl.load(u_in + idx + 1, mask=m, other=0.0)
    d = tl.load(u_in + idx - nx, mask=m, other=0.0)
    u = tl.load(u_in + idx + nx, mask=m, other=0.0)
    lap = (l + r) + (d + u) - 4.0 * c
    tl.store(u_out + idx, tl.where(edge, c, c + alpha * lap), mask=inside)

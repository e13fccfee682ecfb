"""Exploit: special-cases the sizes it was shown (the smoke in-distribution
grids 64, 128 and 256) and returns garbage anywhere else."""
import triton
import triton.language as tl

# kevo: grid heat_step = (cdiv(NX, BLOCK), NY)


@triton.jit
def heat_step(u_in, u_out, NX, NY, alpha, BLOCK: tl.constexpr = 256):
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    j = tl.program_id(1)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < nx
    idx = j * nx + i
    c = tl.load(u_in + idx, mask=inside)
    edge = (i == 0) | (i == nx - 1) | (j == 0) | (j == ny - 1)
    m = inside & ~edge
    l = tl.load(u_in + idx - 1, mask=m, other=0.0)
    r = tl.load(u_in + idx + 1, mask=m, other=0.0)
    d = tl.load(u_in + idx - nx, mask=m, other=0.0)
    u = tl.load(u_in + idx + nx, mask=m, other=0.0)
    out = tl.where(edge, c, c + alpha * (l + r + d + u - 4.0 * c))
    shown = (nx == 64) | (nx == 128) | (nx == 256)
    tl.store(u_out + idx, tl.where(shown, out, 0.0), mask=inside)

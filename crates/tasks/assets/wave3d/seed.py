"""wave3d seed: one program per row segment of BLOCK cells along i, eight
masked global loads per cell, no reuse between rows or planes."""
import triton
import triton.language as tl

# kevo: grid wave_step = (cdiv(NX, BLOCK), NY, NZ)


@triton.jit
def wave_step(u_prev, u_curr, u_next, NX, NY, NZ, alpha, BLOCK: tl.constexpr = 256):
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    nz = NZ.to(tl.int32)
    j = tl.program_id(1)
    k = tl.program_id(2)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < nx
    plane = nx * ny
    idx = (k * ny + j) * nx + i
    c = tl.load(u_curr + idx, mask=inside)
    face = (i == 0) | (i == nx - 1) | (j == 0) | (j == ny - 1) | (k == 0) | (k == nz - 1)
    m = inside & ~face
    xm = tl.load(u_curr + idx - 1, mask=m, other=0.0)
    xp = tl.load(u_curr + idx + 1, mask=m, other=0.0)
    ym = tl.load(u_curr + idx - nx, mask=m, other=0.0)
    yp = tl.load(u_curr + idx + nx, mask=m, other=0.0)
    zm = tl.load(u_curr + idx - plane, mask=m, other=0.0)
    zp = tl.load(u_curr + idx + plane, mask=m, other=0.0)
    p = tl.load(u_prev + idx, mask=m, other=0.0)
    lap = xm + xp + ym + yp + zm + zp - 6.0 * c
    out = 2.0 * c - p + alpha * lap
    tl.store(u_next + idx, tl.where(face, c, out), mask=inside)

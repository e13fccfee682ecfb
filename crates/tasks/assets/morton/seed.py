"""morton seed: one lane per Morton index t. It decodes (x, y, z) with a
per-bit loop, re-encodes the six neighbours with another per-bit loop, copies
face cells, and does seven loads and one store."""
import triton
import triton.language as tl

# kevo: grid morton_stencil = (cdiv(N * N * N, BLOCK),)


@triton.jit
def morton_stencil(u_in, u_out, N, logN, alpha, BLOCK: tl.constexpr = 256):
    n = N.to(tl.int32)
    logn = logN.to(tl.int32)
    t = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = t < n * n * n
    x = tl.zeros([BLOCK], dtype=tl.int32)
    y = tl.zeros([BLOCK], dtype=tl.int32)
    z = tl.zeros([BLOCK], dtype=tl.int32)
    for b in range(0, logn):
        x |= ((t >> (3 * b)) & 1) << b
        y |= ((t >> (3 * b + 1)) & 1) << b
        z |= ((t >> (3 * b + 2)) & 1) << b
    face = (x == 0) | (y == 0) | (z == 0) | (x == n - 1) | (y == n - 1) | (z == n - 1)
    # Morton indices of the six neighbours (only used for interior cells).
    xm = tl.zeros([BLOCK], dtype=tl.int32)
    xp = tl.zeros([BLOCK], dtype=tl.int32)
    ym = tl.zeros([BLOCK], dtype=tl.int32)
    yp = tl.zeros([BLOCK], dtype=tl.int32)
    zm = tl.zeros([BLOCK], dtype=tl.int32)
    zp = tl.zeros([BLOCK], dtype=tl.int32)
    for b in range(0, logn):
        bx = (x >> b) & 1
        by = ((y >> b) & 1) << 1
        bz = ((z >> b) & 1) << 2
        xm |= ((((x - 1) >> b) & 1) | by | bz) << (3 * b)
        xp |= ((((x + 1) >> b) & 1) | by | bz) << (3 * b)
        ym |= (bx | ((((y - 1) >> b) & 1) << 1) | bz) << (3 * b)
        yp |= (bx | ((((y + 1) >> b) & 1) << 1) | bz) << (3 * b)
        zm |= (bx | by | ((((z - 1) >> b) & 1) << 2)) << (3 * b)
        zp |= (bx | by | ((((z + 1) >> b) & 1) << 2)) << (3 * b)
    m = inside & ~face
    c = tl.load(u_in + t, mask=inside)
    s = (tl.load(u_in + xm, mask=m, other=0.0) + tl.load(u_in + xp, mask=m, other=0.0)
         + tl.load(u_in + ym, mask=m, other=0.0) + tl.load(u_in + yp, mask=m, other=0.0)
         + tl.load(u_in + zm, mask=m, other=0.0) + tl.load(u_in + zp, mask=m, other=0.0))
    out = c + alpha * (s - 6.0 * c)
    tl.store(u_out + t, tl.where(face, c, out), mask=inside)

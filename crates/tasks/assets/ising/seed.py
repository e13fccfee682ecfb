"""ising seed: one program per row segment of BLOCK sites over the whole
lattice; wrong-colour lanes are masked off, the others do five byte loads,
a table lookup, the hash and a masked in-place store."""
import triton
import triton.language as tl

# kevo: grid ising_step = (cdiv(NX, BLOCK), NY)


@triton.jit
def _fmix32(x):
    # Murmur3 finaliser on uint32 (wrapping multiplies, logical shifts).
    x ^= x >> 16
    x *= 0x85EBCA6B
    x ^= x >> 13
    x *= 0xC2B2AE35
    x ^= x >> 16
    return x


@triton.jit
def ising_step(spins, p_accept, NX, NY, step_idx, seed, BLOCK: tl.constexpr = 256):
    nx = NX.to(tl.int32)
    ny = NY.to(tl.int32)
    j = tl.program_id(1)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    colour = (step_idx & 1).to(tl.int32)
    m = (i < nx) & (((i + j) & 1) == colour)
    im = tl.where(i == 0, nx - 1, i - 1)
    ip = tl.where(i == nx - 1, 0, i + 1)
    jm = tl.where(j == 0, ny - 1, j - 1)
    jp = tl.where(j == ny - 1, 0, j + 1)
    site = j * nx + i
    s = tl.load(spins + site, mask=m, other=1).to(tl.int32)
    h = (tl.load(spins + j * nx + im, mask=m, other=0).to(tl.int32)
         + tl.load(spins + j * nx + ip, mask=m, other=0).to(tl.int32)
         + tl.load(spins + jm * nx + i, mask=m, other=0).to(tl.int32)
         + tl.load(spins + jp * nx + i, mask=m, other=0).to(tl.int32))
    p = tl.load(p_accept + (s * h + 4) // 2, mask=m, other=0.0)
    key = _fmix32(seed.to(tl.uint32) + step_idx.to(tl.uint32) * 0x9E3779B9)
    bits = _fmix32(key ^ site.to(tl.uint32))
    u = (bits >> 8).to(tl.float32) * (1.0 / 16777216.0)
    tl.store(spins + site, (-s).to(tl.int8), mask=m & (u < p))

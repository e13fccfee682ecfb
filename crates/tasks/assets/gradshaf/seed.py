"""gradshaf seed. Reduce: one single program strides over the interior in
chunks of RBLOCK (flat index q -> i = 1 + q % (NR-2), j = 1 + q / (NR-2)),
keeping a per-lane max, then one tl.max. Step: one program per row segment
of BLOCK cells, coefficients recomputed per cell, five neighbour loads and
one psi_axis load."""
import triton
import triton.language as tl

# kevo: grid gradshaf_axis_reduce = (1,)
# kevo: warps gradshaf_axis_reduce = 16
# kevo: grid gradshaf_step = (cdiv(NR, BLOCK), NZ)


@triton.jit
def gradshaf_axis_reduce(psi, psi_axis, NR, NZ, RBLOCK: tl.constexpr = 8192):
    nr = NR.to(tl.int32)
    nz = NZ.to(tl.int32)
    nri = nr - 2
    total = nri * (nz - 2)
    m = tl.full([RBLOCK], -3.402823466e38, dtype=tl.float32)
    for q0 in range(0, total, RBLOCK):
        q = q0 + tl.arange(0, RBLOCK)
        i = 1 + q % nri
        j = 1 + q // nri
        v = tl.load(psi + j * nr + i, mask=q < total, other=-3.402823466e38)
        m = tl.maximum(m, v)
    tl.store(psi_axis, tl.max(m, axis=0))


@triton.jit
def gradshaf_step(psi_in, psi_out, psi_axis, NR, NZ, Rmin, dR, dZ, p_axis, mu0, omega,
                  BLOCK: tl.constexpr = 256):
    nr = NR.to(tl.int32)
    nz = NZ.to(tl.int32)
    j = tl.program_id(1)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < nr
    idx = j * nr + i
    psi = tl.load(psi_in + idx, mask=inside, other=0.0)
    edge = (i == 0) | (i == nr - 1) | (j == 0) | (j == nz - 1)
    m = inside & ~edge
    R = Rmin + i.to(tl.float32) * dR
    inv_dR2 = 1.0 / (dR * dR)
    inv_dZ2 = 1.0 / (dZ * dZ)
    aW = inv_dR2 + 1.0 / (2.0 * R * dR)
    aE = inv_dR2 - 1.0 / (2.0 * R * dR)
    aN = inv_dZ2
    aS = inv_dZ2
    aC = -2.0 * inv_dR2 - 2.0 * inv_dZ2
    axis = tl.load(psi_axis)
    psin = psi / axis
    J = tl.where((psin > 0.0) & (psin < 1.0), R * p_axis * 4.0 * psin * (1.0 - psin), 0.0)
    rhs = -mu0 * R * J
    lap = (aW * tl.load(psi_in + idx - 1, mask=m, other=0.0)
           + aE * tl.load(psi_in + idx + 1, mask=m, other=0.0)
           + aN * tl.load(psi_in + idx + nr, mask=m, other=0.0)
           + aS * tl.load(psi_in + idx - nr, mask=m, other=0.0)
           + aC * psi)
    out = psi + omega * (rhs - lap) / aC
    tl.store(psi_out + idx, tl.where(edge, psi, out), mask=inside)

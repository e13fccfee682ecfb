"""hmc seed: one program per BLOCK chains, one chain per row of a
[BLOCK, DMAX] tile (columns >= d kept at zero). A is read (transposed,
zero-padded to DMAX x DMAX) once per program; every mat-vec of the BLOCK
chains is one fp32 tl.dot (input_precision="ieee", no TF32)."""
import triton
import triton.language as tl

# kevo: grid hmc_step = (cdiv(K, BLOCK),)
# kevo: warps hmc_step = 4


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
def _uniform(key, ctr):
    # 24-bit uniform in [0, 1): bits = fmix32(fmix32(key ^ ctr)).
    bits = _fmix32(_fmix32(key ^ ctr))
    return (bits >> 8).to(tl.float32) * (1.0 / 16777216.0)


@triton.jit
def hmc_step(q_in, q_out, accept_cnt, A, K, d, L, eps, hmc_step_idx, seed,
             BLOCK: tl.constexpr = 32, DMAX: tl.constexpr = 32):
    k = K.to(tl.int32)
    dd = d.to(tl.int32)
    nl = L.to(tl.int32)
    chain = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mc = chain < k
    col = tl.arange(0, DMAX)
    mcol = col < dd
    m2 = mc[:, None] & mcol[None, :]
    offs = chain[:, None] * dd + col[None, :]
    q = tl.load(q_in + offs, mask=m2, other=0.0)
    # At[jj, ii] = A[ii*d + jj], zero outside d x d: f = q @ At is A q per row.
    row = tl.arange(0, DMAX)
    At = tl.load(A + col[None, :] * dd + row[:, None],
                 mask=(row[:, None] < dd) & mcol[None, :], other=0.0)

    key = seed + chain.to(tl.uint32) * 0x9E3779B9
    base = hmc_step_idx * (d + 1)
    # Momentum by Box-Muller: columns 2m and 2m+1 share the draws b+2m, b+2m+1.
    pair = (col - (col & 1)).to(tl.uint32)
    u1 = tl.maximum(_uniform(key[:, None], base + pair[None, :]), 1e-7)
    u2 = _uniform(key[:, None], base + pair[None, :] + 1)
    r = tl.sqrt(-2.0 * tl.log(u1))
    theta = 6.2831853 * u2
    p = tl.where((col & 1)[None, :] == 0, r * tl.cos(theta), r * tl.sin(theta))
    p = tl.where(mcol[None, :], p, 0.0)

    # Energy at the start; f = A q.
    q_old = q
    f = tl.dot(q, At, input_precision="ieee")
    U_old = tl.sum(0.5 * q * f, axis=1)
    K_old = tl.sum(0.5 * p * p, axis=1)

    # Leapfrog: half kick, L drifts each followed by a kick (the last a half).
    p -= 0.5 * eps * f
    for l in range(0, nl):
        q += eps * p
        f = tl.dot(q, At, input_precision="ieee")
        s = tl.where(l == nl - 1, 0.5 * eps, eps)
        p -= s * f

    U_new = tl.sum(0.5 * q * f, axis=1)
    K_new = tl.sum(0.5 * p * p, axis=1)
    dH = (U_new + K_new) - (U_old + K_old)
    u_acc = _uniform(key, base + d)
    finite = (dH == dH) & (tl.abs(dH) <= 3.4028234663852886e38)
    accept = finite & (tl.log(tl.maximum(u_acc, 1e-30)) < -dH)

    tl.store(q_out + offs, tl.where(accept[:, None], q, q_old), mask=m2)
    cnt = tl.load(accept_cnt + chain, mask=mc, other=0)
    tl.store(accept_cnt + chain, cnt + accept.to(tl.uint32), mask=mc)

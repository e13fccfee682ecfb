"""Class 5 exploit: under-compute. Forces are recomputed only on even steps
(told apart by the ping-pong order of the buffers); odd steps drift with
the old velocity. Half the O(N^2) work; it passed a tolerance 10^4 times
the error of honest kernels."""
import triton
import triton.language as tl

# kevo: grid nbody_step = (cdiv(N, BLOCK_I),)


@triton.jit
def nbody_step(pos_in, pos_out, vel_in, vel_out, mass, N, dt, eps, G,
               BLOCK_I: tl.constexpr = 64, BLOCK_J: tl.constexpr = 64):
    n = N.to(tl.int32)
    i = tl.program_id(0) * BLOCK_I + tl.arange(0, BLOCK_I)
    mi = i < n
    pix = tl.load(pos_in + 4 * i, mask=mi, other=0.0)
    piy = tl.load(pos_in + 4 * i + 1, mask=mi, other=0.0)
    piz = tl.load(pos_in + 4 * i + 2, mask=mi, other=0.0)
    eps2 = eps * eps
    ax = tl.zeros([BLOCK_I], dtype=tl.float32)
    ay = tl.zeros([BLOCK_I], dtype=tl.float32)
    az = tl.zeros([BLOCK_I], dtype=tl.float32)
    even = pos_in.to(tl.uint64, bitcast=True) < pos_out.to(tl.uint64, bitcast=True)
    if even:
        for j0 in range(0, n, BLOCK_J):
            j = j0 + tl.arange(0, BLOCK_J)
            mj = j < n
            pjx = tl.load(pos_in + 4 * j, mask=mj, other=0.0)
            pjy = tl.load(pos_in + 4 * j + 1, mask=mj, other=0.0)
            pjz = tl.load(pos_in + 4 * j + 2, mask=mj, other=0.0)
            mj_ = tl.load(mass + j, mask=mj, other=0.0)
            dx = pjx[None, :] - pix[:, None]
            dy = pjy[None, :] - piy[:, None]
            dz = pjz[None, :] - piz[:, None]
            r2 = dx * dx + dy * dy + dz * dz + eps2
            s = G * mj_[None, :] * tl.rsqrt(r2 * r2 * r2)
            ax += tl.sum(s * dx, axis=1)
            ay += tl.sum(s * dy, axis=1)
            az += tl.sum(s * dz, axis=1)
    vx = tl.load(vel_in + 4 * i, mask=mi, other=0.0) + ax * dt
    vy = tl.load(vel_in + 4 * i + 1, mask=mi, other=0.0) + ay * dt
    vz = tl.load(vel_in + 4 * i + 2, mask=mi, other=0.0) + az * dt
    zero = tl.zeros([BLOCK_I], dtype=tl.float32)
    tl.store(vel_out + 4 * i, vx, mask=mi)
    tl.store(vel_out + 4 * i + 1, vy, mask=mi)
    tl.store(vel_out + 4 * i + 2, vz, mask=mi)
    tl.store(vel_out + 4 * i + 3, zero, mask=mi)
    tl.store(pos_out + 4 * i, pix + vx * dt, mask=mi)
    tl.store(pos_out + 4 * i + 1, piy + vy * dt, mask=mi)
    tl.store(pos_out + 4 * i + 2, piz + vz * dt, mask=mi)
    tl.store(pos_out + 4 * i + 3, zero, mask=mi)

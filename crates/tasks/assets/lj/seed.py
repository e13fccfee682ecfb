"""lj seed: clear and build the cell list with atomics, then one program per
BLOCK particles scans the 27 neighbouring cells (periodic wrap), reading the
occupants of each particle's cell SLOTS at a time ([BLOCK, SLOTS] tiles of
gathered positions straight from global memory). No pair sharing."""
import triton
import triton.language as tl

# kevo: grid lj_clear_cells = (cdiv(M3, BLOCK),)
# kevo: grid lj_build_cells = (cdiv(N, BLOCK),)
# kevo: grid lj_step = (cdiv(N, BLOCK),)


@triton.jit
def lj_clear_cells(cell_count, M3, BLOCK: tl.constexpr = 256):
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(cell_count + c, tl.zeros([BLOCK], dtype=tl.uint32), mask=c < M3.to(tl.int32))


@triton.jit
def _cell_of(r, L, cell, m):
    # Cell coordinate of the wrapped position r - L*floor(r/L), clamped.
    w = r - L * tl.floor(r / L)
    c = (w / cell).to(tl.int32)
    return tl.minimum(tl.maximum(c, 0), m - 1)


@triton.jit
def _round(x):
    # roundf: halfway cases away from zero.
    return tl.where(x >= 0.0, tl.floor(x + 0.5), tl.ceil(x - 0.5))


@triton.jit
def lj_build_cells(pos, cell_count, cell_list, N, M, L, MAX_PER_CELL, BLOCK: tl.constexpr = 128):
    n = N.to(tl.int32)
    m = M.to(tl.int32)
    cap = MAX_PER_CELL.to(tl.int32)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mi = i < n
    cell = L / m.to(tl.float32)
    cx = _cell_of(tl.load(pos + 4 * i, mask=mi, other=0.0), L, cell, m)
    cy = _cell_of(tl.load(pos + 4 * i + 1, mask=mi, other=0.0), L, cell, m)
    cz = _cell_of(tl.load(pos + 4 * i + 2, mask=mi, other=0.0), L, cell, m)
    c = (cz * m + cy) * m + cx
    slot = tl.atomic_add(cell_count + c, 1, mask=mi).to(tl.int32)
    tl.store(cell_list + c * cap + slot, i.to(tl.uint32), mask=mi & (slot < cap))


@triton.jit
def lj_step(pos_in, pos_out, vel_in, vel_out, cell_count, cell_list, N, M, L, rcut2, dt,
            MAX_PER_CELL, BLOCK: tl.constexpr = 64, SLOTS: tl.constexpr = 16):
    n = N.to(tl.int32)
    m = M.to(tl.int32)
    cap = MAX_PER_CELL.to(tl.int32)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mi = i < n
    rix = tl.load(pos_in + 4 * i, mask=mi, other=0.0)
    riy = tl.load(pos_in + 4 * i + 1, mask=mi, other=0.0)
    riz = tl.load(pos_in + 4 * i + 2, mask=mi, other=0.0)
    cell = L / m.to(tl.float32)
    cx = _cell_of(rix, L, cell, m)
    cy = _cell_of(riy, L, cell, m)
    cz = _cell_of(riz, L, cell, m)
    fx = tl.zeros([BLOCK], dtype=tl.float32)
    fy = tl.zeros([BLOCK], dtype=tl.float32)
    fz = tl.zeros([BLOCK], dtype=tl.float32)
    slots = tl.arange(0, SLOTS)
    for nb in range(0, 27):
        nx = (cx + (nb % 3 - 1) + m) % m
        ny = (cy + ((nb // 3) % 3 - 1) + m) % m
        nz = (cz + (nb // 9 - 1) + m) % m
        c = (nz * m + ny) * m + nx
        count = tl.load(cell_count + c, mask=mi, other=0).to(tl.int32)
        count = tl.minimum(count, cap)
        most = tl.max(count, axis=0)
        for s0 in range(0, most, SLOTS):
            s = s0 + slots
            ms = mi[:, None] & (s[None, :] < count[:, None])
            j = tl.load(cell_list + c[:, None] * cap + s[None, :], mask=ms, other=0).to(tl.int32)
            ms = ms & (j != i[:, None])
            ddx = tl.load(pos_in + 4 * j, mask=ms, other=0.0) - rix[:, None]
            ddy = tl.load(pos_in + 4 * j + 1, mask=ms, other=0.0) - riy[:, None]
            ddz = tl.load(pos_in + 4 * j + 2, mask=ms, other=0.0) - riz[:, None]
            ddx -= L * _round(ddx / L)
            ddy -= L * _round(ddy / L)
            ddz -= L * _round(ddz / L)
            r2 = ddx * ddx + ddy * ddy + ddz * ddz
            pair = ms & (r2 < rcut2) & (r2 > 1e-12)
            inv2 = 1.0 / tl.where(pair, r2, 1.0)
            inv6 = inv2 * inv2 * inv2
            s6 = tl.where(pair, -24.0 * (2.0 * inv6 * inv6 - inv6) * inv2, 0.0)
            fx += tl.sum(s6 * ddx, axis=1)
            fy += tl.sum(s6 * ddy, axis=1)
            fz += tl.sum(s6 * ddz, axis=1)
    vx = tl.load(vel_in + 4 * i, mask=mi, other=0.0) + fx * dt
    vy = tl.load(vel_in + 4 * i + 1, mask=mi, other=0.0) + fy * dt
    vz = tl.load(vel_in + 4 * i + 2, mask=mi, other=0.0) + fz * dt
    zero = tl.zeros([BLOCK], dtype=tl.float32)
    tl.store(pos_out + 4 * i, rix + vx * dt, mask=mi)
    tl.store(pos_out + 4 * i + 1, riy + vy * dt, mask=mi)
    tl.store(pos_out + 4 * i + 2, riz + vz * dt, mask=mi)
    tl.store(pos_out + 4 * i + 3, zero, mask=mi)
    tl.store(vel_out + 4 * i, vx, mask=mi)
    tl.store(vel_out + 4 * i + 1, vy, mask=mi)
    tl.store(vel_out + 4 * i + 2, vz, mask=mi)
    tl.store(vel_out + 4 * i + 3, zero, mask=mi)

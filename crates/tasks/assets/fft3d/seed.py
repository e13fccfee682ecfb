"""fft3d seed: radix-2 decimation in time, one lane per butterfly. A program
owns BLOCK butterflies, i.e. BLOCK / (N/2) whole lines (N/2 <= BLOCK for
every N <= 2*BLOCK). It copies its lines into out_data at bit-reversed
positions, then runs log2(N) butterfly stages in place in out_data, with a
barrier after each stage (the lines stay in global memory; twiddles from
cos/sin on the fly). float2 element e is out_data[2*e], out_data[2*e + 1]."""
import triton
import triton.language as tl

# kevo: grid fft3d_x = (cdiv(N * N * (N // 2), BLOCK),)
# kevo: grid fft3d_y = (cdiv(N * N * (N // 2), BLOCK),)
# kevo: grid fft3d_z = (cdiv(N * N * (N // 2), BLOCK),)


@triton.jit
def _fft_lines(in_data, out_data, N, AXIS: tl.constexpr, BLOCK: tl.constexpr):
    n = N.to(tl.int32)
    half = n // 2
    t = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    g = t // half  # the line
    p = t % half  # the butterfly within the line
    ok = g < n * n
    # Line g's element q is at base + q * stride (in float2 elements).
    if AXIS == 0:  # k = g / N, j = g % N: along i
        base = g.to(tl.int64) * n
        stride = 1
    elif AXIS == 1:  # k = g / N, i = g % N: along j
        base = (g // n).to(tl.int64) * n * n + (g % n)
        stride = n
    else:  # j = g / N, i = g % N: along k
        base = g.to(tl.int64)
        stride = n * n
    logn = 0
    for b in range(0, 11):
        logn += (n > (1 << b)).to(tl.int32)
    # Bit-reversed copy: elements p and p + N/2 of the line.
    r0 = tl.zeros([BLOCK], dtype=tl.int32)
    r1 = tl.zeros([BLOCK], dtype=tl.int32)
    p1 = p + half
    for b in range(0, logn):
        r0 |= ((p >> b) & 1) << (logn - 1 - b)
        r1 |= ((p1 >> b) & 1) << (logn - 1 - b)
    src0 = 2 * (base + p.to(tl.int64) * stride)
    src1 = 2 * (base + p1.to(tl.int64) * stride)
    dst0 = 2 * (base + r0.to(tl.int64) * stride)
    dst1 = 2 * (base + r1.to(tl.int64) * stride)
    tl.store(out_data + dst0, tl.load(in_data + src0, mask=ok), mask=ok)
    tl.store(out_data + dst0 + 1, tl.load(in_data + src0 + 1, mask=ok), mask=ok)
    tl.store(out_data + dst1, tl.load(in_data + src1, mask=ok), mask=ok)
    tl.store(out_data + dst1 + 1, tl.load(in_data + src1 + 1, mask=ok), mask=ok)
    tl.debug_barrier()
    for s in range(0, logn):
        h = 1 << s
        k = p & (h - 1)
        i0 = ((p >> s) << (s + 1)) + k
        o0 = 2 * (base + i0.to(tl.int64) * stride)
        o1 = 2 * (base + (i0 + h).to(tl.int64) * stride)
        ang = -6.283185307179586 * k.to(tl.float32) / (2 * h).to(tl.float32)
        c = tl.cos(ang)
        sn = tl.sin(ang)
        ax = tl.load(out_data + o0, mask=ok)
        ay = tl.load(out_data + o0 + 1, mask=ok)
        bx = tl.load(out_data + o1, mask=ok)
        by = tl.load(out_data + o1 + 1, mask=ok)
        tx = bx * c - by * sn
        ty = bx * sn + by * c
        tl.store(out_data + o0, ax + tx, mask=ok)
        tl.store(out_data + o0 + 1, ay + ty, mask=ok)
        tl.store(out_data + o1, ax - tx, mask=ok)
        tl.store(out_data + o1 + 1, ay - ty, mask=ok)
        tl.debug_barrier()


@triton.jit
def fft3d_x(in_data, out_data, N, BLOCK: tl.constexpr = 512):
    _fft_lines(in_data, out_data, N, 0, BLOCK)


@triton.jit
def fft3d_y(in_data, out_data, N, BLOCK: tl.constexpr = 512):
    _fft_lines(in_data, out_data, N, 1, BLOCK)


@triton.jit
def fft3d_z(in_data, out_data, N, BLOCK: tl.constexpr = 512):
    _fft_lines(in_data, out_data, N, 2, BLOCK)

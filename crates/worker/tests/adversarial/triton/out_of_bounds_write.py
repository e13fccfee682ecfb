"""Exploit: correct result, but it also writes past the end of y."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    xv = tl.load(x + i, mask=m)
    yv = tl.load(y + i, mask=m)
    tl.store(y + i, a * xv + yv, mask=m)
    past = tl.arange(0, 16)
    tl.store(y + N + past, tl.zeros([16], dtype=tl.float32), mask=(past < 16) & (tl.program_id(0) == 0))

"""Exploit: right answer, but it scribbles on its read-only input x (a
Triton pointer carries no const: nothing but the evaluator stops it)."""
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
    tl.store(x + i, tl.zeros([BLOCK], dtype=tl.float32), mask=m)

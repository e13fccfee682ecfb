"""Refused at the module check: a module-level assignment from a call
(code that runs at import, even an innocent-looking one)."""
import triton
import triton.language as tl

CHUNK = triton.cdiv(1 << 20, 1024)


# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

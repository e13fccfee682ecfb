"""Refused at the module check: torch imported only where it exists, under
a try (no statement but imports, constants and jit functions at module
level)."""
try:
    import torch
except ImportError:
    torch = None
import triton
import triton.language as tl


# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

"""Refused at the module check: triton.testing at module level (do_bench
runs kernels and imports torch)."""
import triton
import triton.language as tl

BENCH = triton.testing.do_bench


# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

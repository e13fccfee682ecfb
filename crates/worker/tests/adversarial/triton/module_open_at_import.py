"""Refused at the module check: a bare call at module level that writes a
file on import (CANARY_PATH is replaced by the test)."""
import triton
import triton.language as tl

open("CANARY_PATH", "a").write("ran at import")


# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

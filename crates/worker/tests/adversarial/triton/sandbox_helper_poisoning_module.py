"""Refused at the module check: patches triton.language at import
(`tl.load = tl.store`), which would change what `tl.load` means for every
later candidate compiled by the same helper. A module binds only names
of its own, to constants."""
import triton
import triton.language as tl

tl.load = tl.store

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

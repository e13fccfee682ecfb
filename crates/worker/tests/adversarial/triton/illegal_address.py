"""Exploit: writes through a wild pointer into unmapped memory (an integer
turned into a pointer)."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    n = N.to(tl.int32)
    address = 0x10 + i.to(tl.uint64) * 4096
    wild = address.to(tl.pointer_type(tl.float32), bitcast=True)
    tl.store(wild, a * tl.load(x + i % n))
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

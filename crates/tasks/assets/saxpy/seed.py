"""saxpy seed: one program per BLOCK elements, masked loads, one multiply-add."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)
# kevo: warps saxpy = 4


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    xv = tl.load(x + i, mask=m)
    yv = tl.load(y + i, mask=m)
    tl.store(y + i, a * xv + yv, mask=m)

"""A slow saxpy start: 64 elements per program and one warp, so the grid
has a million small programs."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)
# kevo: warps saxpy = 1


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 64):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

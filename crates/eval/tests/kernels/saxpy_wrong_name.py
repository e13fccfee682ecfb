"""Wrong on purpose: the entry point is misnamed."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy_fast(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    xv = tl.load(x + i, mask=m)
    yv = tl.load(y + i, mask=m)
    tl.store(y + i, a * xv + yv, mask=m)

"""Correct but unusual: a 2-D grid (4 programs across, enough rows down),
several sub-blocks per program in a loop, the element-wise work in a
helper @triton.jit function, a module-level tl.constexpr, an fma, and
declared warps and stages."""
import triton
import triton.language as tl

ACROSS = tl.constexpr(4)

# kevo: grid saxpy = (4, cdiv(N, 4 * BLOCK * ITEMS))
# kevo: warps saxpy = 2
# kevo: stages saxpy = 2


@triton.jit
def axpy(a, x, y):
    return tl.fma(a, x, y)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 256, ITEMS: tl.constexpr = 4):
    n = N.to(tl.int32)
    chunk = tl.program_id(1) * ACROSS + tl.program_id(0)
    base = chunk * (BLOCK * ITEMS)
    for k in tl.static_range(ITEMS):
        i = base + k * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(y + i, axpy(a, tl.load(x + i, mask=m), tl.load(y + i, mask=m)), mask=m)

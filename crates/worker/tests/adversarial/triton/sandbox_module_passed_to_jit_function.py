"""Refused at the module check: the module triton.language passed as an
argument to a helper jit function, whose parameter then leads to Python's
open. A module may be named only to reach what is in it (`tl.load`),
never kept in a variable, passed or returned; and the attributes of a
parameter must be those of Triton's tensors, types and values."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def leak(m: tl.constexpr):
    tl.static_assert(False, m.core.builtins.open("CANARY_PATH").read())


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    leak(tl)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

"""Refused at the module check: the classic escape from a restricted
Python, `x.__class__.__mro__[-1].__subclasses__()`, from a kernel
argument to every class the helper has loaded (and from there to os).
No dunder name is part of a kernel."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    classes = a.__class__.__mro__[-1].__subclasses__()
    tl.static_assert(False, classes)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

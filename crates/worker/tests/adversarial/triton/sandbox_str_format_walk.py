"""Refused at the module check: str.format walks attributes and items
itself (`"{0.fn.__globals__[os].environ}"`), past any check of the names
a kernel writes. From a jit function it reaches the globals of its
Python function and the helper's environment. `.format` is not an
attribute of Triton's tensors, types or values."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    tl.static_assert(False, "{0.fn.__globals__[core].builtins.__dict__}".format(tl.sum))
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

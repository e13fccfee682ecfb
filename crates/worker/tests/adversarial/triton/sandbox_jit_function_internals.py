"""Refused at the module check: a jit function of triton.language
(`tl.sum`) is a Python object whose `fn` is a plain Python function;
Triton's front end calls a plain function as Python while it compiles.
Attributes after a value must be those of Triton's tensors, types and
values, and `fn`, `src`, `run` and `warmup` are not."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    s = tl.sum.fn(tl.load(x + i, mask=m), 0)
    tl.store(y + i, a * tl.load(x + i, mask=m) + s, mask=m)

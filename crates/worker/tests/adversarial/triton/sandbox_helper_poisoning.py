"""Refused at the module check: sabotage of later candidates. The helper
that compiles candidates is a long-lived process; a module that replaces
triton.compile there (here from a kernel body, which Triton's front end
would evaluate while compiling) would make every later candidate of the
worker fail or slow down. A kernel assigns only to local names."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    triton.compile = tl.static_print
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

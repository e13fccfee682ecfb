"""Refused at the module check: hides the module triton.language inside a
tuple default (`P: tl.constexpr = (1, tl)`) and reaches Python's open
through its second element. Every element of a constant must be a
constant."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024, P: tl.constexpr = (1, tl)):
    tl.static_assert(False, P[1].core.builtins.open("CANARY_PATH").read())
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

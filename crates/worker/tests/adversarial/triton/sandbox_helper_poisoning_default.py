"""Refused at the module check: a parameter default that calls Python's
setattr (reached through triton.language.core) to replace triton.compile
when the module is imported. Defaults are evaluated at import, before
Triton sees the kernel; a default must be a constant."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024,
          P: tl.constexpr = tl.core.builtins.setattr(triton, "compile", None)):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

"""Refused at the module check: the module binds `T = tl`, a name for the
module triton.language that is not an import, and the kernel body runs
Python through it (`T.core.builtins.exec`) while Triton compiles it. The
check once followed only import aliases, so `T` passed as a "constant"
and the exec ran in the helper (the file it writes, CANARY_PATH, would
prove it). A module constant may not be a module."""
import triton
import triton.language as tl

T = tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    T.core.builtins.exec("open('CANARY_PATH', 'a').write('ran')")
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

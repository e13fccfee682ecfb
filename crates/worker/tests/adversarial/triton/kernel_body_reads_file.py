"""A kernel body that opens a file through Python's builtins module (a
module attribute of triton.language.core) while it is compiled and echoes
the contents in a compile error (CANARY_PATH is replaced by the test)."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    tl.static_assert(False, tl.core.builtins.open("CANARY_PATH").read())
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

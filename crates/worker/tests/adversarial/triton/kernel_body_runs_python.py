"""A kernel body that calls Python while it is compiled: Triton's front end
calls any Python callable a kernel names, and attributes of tl lead to
Python's builtins (triton.language.core.builtins) and os
(triton.language.core.knobs.os). This one calls os.getpid and
builtins.pow/str and echoes the result, 7**23 = 27368747340080916343, a
number its source does not hold, in a compile error: if that number comes
back, host code of the candidate ran in the helper."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    tl.static_assert(
        False,
        tl.core.builtins.str(tl.core.builtins.pow(7, 23) + 0 * tl.core.knobs.os.getpid()),
    )
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

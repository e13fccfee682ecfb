"""Refused at the module check: reaches Python's builtins by computed
attribute names (`getattr(tl, "co" + "re")`), which no static path check
could follow. Triton maps `getattr` onto Python's while it compiles; a
kernel may not name getattr (nor setattr, hasattr, eval, exec, open...)."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    b = getattr(getattr(tl, "co" + "re"), "buil" + "tins")
    tl.static_assert(False, b.open("CANARY_PATH").read())
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

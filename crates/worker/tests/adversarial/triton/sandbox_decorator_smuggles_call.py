"""Refused at the module check: a call smuggled into the decorator's
arguments (`@triton.jit(do_not_specialize=...)`), which Python evaluates
when the module is imported. The decorator's arguments must be
constants, and only do_not_specialize, do_not_specialize_on_alignment,
debug and noinline are allowed (repr and launch_metadata take Python
callables)."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit(do_not_specialize=tl.core.builtins.exec("open('CANARY_PATH', 'a').write('ran')"))
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

"""Refused at the module check: `from triton import runtime` next to an
honest `import triton.language as tl`; triton.runtime holds the driver
(devices, launches from the host) and the JIT's caches. Of triton itself
a module imports only jit, cdiv, next_power_of_2 and language."""
import triton
import triton.language as tl
from triton import runtime

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    tl.static_assert(False, runtime.driver.active.get_current_target().arch)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

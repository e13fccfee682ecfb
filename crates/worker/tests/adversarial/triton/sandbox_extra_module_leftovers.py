"""Refused at the module check: triton.language.extra keeps the loop
variables of its own import code as attributes: `spec` (a ModuleSpec
whose loader executes modules), `module_from_spec` (importlib's) and the
pkgutil module. Everything reached from an allowed module must be part of
the kernel language."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    tl.static_assert(False, tl.extra.module_from_spec(tl.extra.spec))
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

"""Refused at the module check: triton.runtime at module level (the
driver, the device, launching kernels from the host)."""
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_current_device()


# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

"""Refused at the module check: a kernel body that calls Python's open
directly and prints what it read (Triton's `print` is tl.device_print,
but its argument would be evaluated in the helper while compiling)."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    print(open("CANARY_PATH").read())
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

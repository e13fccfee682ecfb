"""Refused at the module check: reads a file when the module is imported
(CANARY_PATH is replaced by the test with a file holding a secret token);
nothing of a candidate runs before its module passes the check."""
import triton
import triton.language as tl

SECRET = open("CANARY_PATH").read()


# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

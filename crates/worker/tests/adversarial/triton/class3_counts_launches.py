"""Class 3 exploit: count launches in a word past the end of y and do the
work only from launch 12 on: with 3 warm-ups and 10 timed runs, only the
last timed run and the verification run (launch 13) were ever checked.
The verification launch puts the canary back, so a final guard check sees
nothing."""
import triton
import triton.language as tl

CANARY = tl.constexpr(0xA5A5A5A5)

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    counter = (y + N + 64).to(tl.pointer_type(tl.uint32))
    seen = tl.load(counter)
    launch = seen - CANARY
    m = (i < N) & (launch >= 12)
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
    tl.store(counter, tl.where(launch >= 13, CANARY, seen + 1).to(tl.uint32), mask=pid == 0)

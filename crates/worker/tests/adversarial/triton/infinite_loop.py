"""Exploit: never finishes. Must end as a timeout, with the worker killed.
The loop reads global memory (volatile) on every trip, so no compiler may
assume it terminates or remove it; `acc` stops growing at 2**24 and stays
non-negative for finite inputs."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    n = N.to(tl.int32)
    acc = a * 0.0
    k = tl.program_id(0) * 0
    while acc >= 0.0:
        acc += tl.load(x + k % n, volatile=True) * 0.0 + 1.0
        k += 1
    xv = tl.load(x + i, mask=m)
    yv = tl.load(y + i, mask=m)
    tl.store(y + i, a * xv + yv + acc, mask=m)

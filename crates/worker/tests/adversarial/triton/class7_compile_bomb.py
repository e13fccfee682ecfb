"""Class 7 exploit: a compile-time unrolling bomb. tl.static_range unrolls
in Triton's front end, so 10^8 iterations make the compiler grow without
bound; compilation has its own time and memory limits."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    n = N.to(tl.int32)
    m = i < n
    acc = tl.load(y + i, mask=m)
    for k in tl.static_range(10000):
        for l in tl.static_range(10000):
            acc += a * tl.load(x + (i + k * l) % n, mask=m)
    tl.store(y + i, acc, mask=m)

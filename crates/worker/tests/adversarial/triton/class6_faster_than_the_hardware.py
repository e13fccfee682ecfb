"""Class 6 stand-in: a kernel whose figures exceed the device's ceilings.
Once classes 1-5 are closed no known kernel passes every check while
claiming more work than the hardware can do, so the suite runs this
correct persistent (grid-stride) saxpy against ceilings declared a
million times below the device's. The outcome must be "suspicious",
never a score."""
import triton
import triton.language as tl

# kevo: grid saxpy = (min(cdiv(N, BLOCK), 264),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    n = N.to(tl.int32)
    step = tl.num_programs(0) * BLOCK
    for start in range(tl.program_id(0) * BLOCK, n, step):
        i = start + tl.arange(0, BLOCK)
        m = i < n
        tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

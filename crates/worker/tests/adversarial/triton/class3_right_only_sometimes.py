"""Class 3 exploit without a memory channel: read the GPU's global timer
(inline PTX) and do the work only in some time windows, betting that the
checked runs fall in one. Every timed run is compared with the first, so
it cannot win."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    t = tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l,r", [i], dtype=tl.uint64, is_pure=False, pack=1
    )
    m = (i < N) & (((t >> 16) & 3) == 0)
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

"""Class 2 probe, Triton only: every Triton kernel gets two hidden pointer
parameters after the task's (global and profile scratch; params 4 and 5
of saxpy), which inline PTX can read. If what the kernel leaves there
survives to the next run, it could keep a memo or a launch counter in it.
This kernel is right on any run that finds no mark of an earlier run, and
leaves its first program's elements untouched (wrong) on one that does:
it is correct only if no state survives between runs. A NULL scratch is
skipped (also correct)."""
import triton
import triton.language as tl

MARK = tl.constexpr(0x4B45564F)

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    address = tl.inline_asm_elementwise(
        "ld.param.u64 $0, [saxpy_param_4];", "=l,r", [pid], dtype=tl.uint64, is_pure=False, pack=1
    )
    scratch = address.to(tl.pointer_type(tl.uint32), bitcast=True)
    mine = (pid == 0) & (address != 0)
    seen = tl.load(scratch, mask=mine, other=0, volatile=True)
    stale = seen == MARK
    r = a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m)
    tl.store(y + i, r, mask=m & ~stale)
    tl.store(scratch, MARK, mask=mine)

"""Class 2 exploit: memoise part of the answer in the memory just past the
end of y (a guard region that older kevo filled once and checked only
after the verification run), keyed by the first input, and replay it on
later launches with the same inputs. On new inputs (the verification run)
it computes honestly and restores the canary, so a final check sees
nothing."""
import triton
import triton.language as tl

MAGIC = tl.constexpr(0x4B45564F)
CANARY = tl.constexpr(0xA5A5A5A5)
MEMO = tl.constexpr(4096)

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tag = (y + N).to(tl.pointer_type(tl.uint32))
    memo = tag + 2
    key = tl.load(x).to(tl.uint32, bitcast=True)
    t0 = tl.load(tag)
    t1 = tl.load(tag + 1)
    memoised = t0 == MAGIC
    replay = memoised & (t1 == key)
    r = a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m)
    in_memo = m & (i < MEMO)
    old = tl.load(memo + i, mask=in_memo & replay, other=0).to(tl.float32, bitcast=True)
    tl.store(y + i, tl.where(in_memo & replay, old, r), mask=m)
    keep = tl.where(memoised, CANARY, r.to(tl.uint32, bitcast=True))
    tl.store(memo + i, keep, mask=in_memo & ~replay)
    first = (pid == 0) & ~replay
    tl.store(tag, tl.where(memoised, CANARY, MAGIC).to(tl.uint32), mask=first)
    tl.store(tag + 1, tl.where(memoised, CANARY, key), mask=first)

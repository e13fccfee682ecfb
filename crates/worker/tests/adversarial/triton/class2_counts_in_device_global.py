"""Class 2/3 exploit: Triton has no module-scope variables, but inline PTX
can declare a .global one. Count launches in it (one asm block per thread,
so one variable) and do the work only from launch 12 on. The cubin's
writable globals are restored before every run (or the module is refused
when they cannot be), so it never gets there."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    pid = tl.program_id(0)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    launches = tl.inline_asm_elementwise(
        """{
        .global .align 4 .u32 kevo_launches;
        .reg .pred p, q;
        .reg .u32 t, old;
        ld.volatile.global.u32 $0, [kevo_launches];
        mov.u32 t, %tid.x;
        setp.eq.u32 p, t, 0;
        setp.eq.u32 q, $1, 0;
        and.pred p, p, q;
        @p atom.global.add.u32 old, [kevo_launches], 1;
        }""",
        "=r,r", [pid], dtype=tl.uint32, is_pure=False, pack=1,
    )
    m = (i < N) & (launches >= 12)
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

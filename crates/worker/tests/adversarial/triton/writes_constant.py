"""Exploit: writes a constant close to the field's mean."""
import triton
import triton.language as tl

# kevo: grid heat_step = (cdiv(NX, BLOCK), NY)


@triton.jit
def heat_step(u_in, u_out, NX, NY, alpha, BLOCK: tl.constexpr = 256):
    nx = NX.to(tl.int32)
    j = tl.program_id(1)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(u_out + j * nx + i, tl.full([BLOCK], 0.25, tl.float32), mask=i < nx)

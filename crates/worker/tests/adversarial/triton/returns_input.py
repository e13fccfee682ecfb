"""Exploit: copies its input to its output (a no-op time step)."""
import triton
import triton.language as tl

# kevo: grid heat_step = (cdiv(NX, BLOCK), NY)


@triton.jit
def heat_step(u_in, u_out, NX, NY, alpha, BLOCK: tl.constexpr = 256):
    nx = NX.to(tl.int32)
    j = tl.program_id(1)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < nx
    tl.store(u_out + j * nx + i, tl.load(u_in + j * nx + i, mask=m), mask=m)

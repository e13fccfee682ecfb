"""Exploit: does no work at all (fastest possible "kernel")."""
import triton
import triton.language as tl

# kevo: grid heat_step = (cdiv(NX, BLOCK), NY)


@triton.jit
def heat_step(u_in, u_out, NX, NY, alpha, BLOCK: tl.constexpr = 256):
    pass

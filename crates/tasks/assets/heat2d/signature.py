# heat2d entry point for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may follow.
import triton
import triton.language as tl


@triton.jit
def heat_step(u_in,    # 0: *fp32 [NY*NX], read (idx = j*NX + i)
              u_out,   # 1: *fp32 [NY*NX], write
              NX,      # 2: u32, columns (fast axis i)
              NY,      # 3: u32, rows (j)
              alpha,   # 4: fp32, 0.20
              BLOCK: tl.constexpr = 256):
    ...

# Launch: n_steps launches per run, u_in/u_out swapped between steps (the
# grid is evaluated per launch from NX, NY and the constexprs). The seed uses
# kevo: grid heat_step = (cdiv(NX, BLOCK), NY)
# (axis 0 up to 2^31-1 programs, axes 1 and 2 up to 65535).

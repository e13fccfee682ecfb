# lbm entry point for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may follow.
import triton
import triton.language as tl


@triton.jit
def lbm_step(f_in,   # 0: *fp32 [9*NX*NY], read, SoA: f[k*NX*NY + j*NX + i]
             f_out,  # 1: *fp32 [9*NX*NY], write, same layout
             NX,     # 2: u32, columns (fast axis i)
             NY,     # 3: u32, rows (j)
             tau,    # 4: fp32, 0.8
             BLOCK: tl.constexpr = 256):
    ...

# Launch: n_steps launches per run, f_in/f_out swapped between steps. The
# seed's grid (axes 1 and 2 up to 65535):
# kevo: grid lbm_step = (cdiv(NX, BLOCK), NY)

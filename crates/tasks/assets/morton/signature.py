# morton entry point for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may follow.
import triton
import triton.language as tl


@triton.jit
def morton_stencil(u_in,   # 0: *fp32 [N^3], Morton order, read
                   u_out,  # 1: *fp32 [N^3], Morton order, write
                   N,      # 2: u32, power of two (<= 1024)
                   logN,   # 3: u32, N = 1 << logN
                   alpha,  # 4: fp32, 0.10
                   BLOCK: tl.constexpr = 256):
    ...

# Element t of the output is the cell with Morton index t (bit b of x, y, z
# at bits 3b, 3b+1, 3b+2). n_steps launches per run, u_in/u_out swapped
# between steps. The seed's grid (one lane per Morton index):
# kevo: grid morton_stencil = (cdiv(N * N * N, BLOCK),)

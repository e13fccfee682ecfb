# saxpy entry point for Triton (argument order and names are the contract;
# scalars arrive by value). Non-constexpr parameters exactly these, in this
# order; tl.constexpr parameters (with defaults) may follow them.
import triton
import triton.language as tl


@triton.jit
def saxpy(x,   # 0: *fp32 [N], read
          y,   # 1: *fp32 [N], read/write, in place: y = a*x + y
          a,   # 2: fp32, 2.5
          N,   # 3: u32, number of elements
          BLOCK: tl.constexpr = 1024):
    ...

# Launch: one launch per run, 1-D. The grid is declared in programs per axis
# over the scalar parameters and constexprs; the seed uses
# kevo: grid saxpy = (cdiv(N, BLOCK),)
# (optional: `# kevo: warps saxpy = 4`, `# kevo: stages saxpy = 3`).

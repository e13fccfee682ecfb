# hmc entry point for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may follow.
import triton
import triton.language as tl


@triton.jit
def hmc_step(q_in,          # 0: *fp32 [K*d], read, chain-major: q[chain*d + i]
             q_out,         # 1: *fp32 [K*d], write
             accept_cnt,    # 2: *u32 [K], read/write (+1 per accepted step)
             A,             # 3: *fp32 [d*d], read, row-major precision matrix
             K,             # 4: u32, chains
             d,             # 5: u32, dimension (even, <= 32)
             L,             # 6: u32, leapfrog steps (10)
             eps,           # 7: fp32, step size (0.20)
             hmc_step_idx,  # 8: u32, 0 .. T-1
             seed,          # 9: u32, RNG seed
             BLOCK: tl.constexpr = 32, DMAX: tl.constexpr = 32):
    ...

# Launch: T = 200 launches per run, q_in/q_out swapped between steps;
# accept_cnt accumulates over the run. Hash arithmetic is uint32 (wrapping).
# fp32 tl.dot defaults to TF32: pass input_precision="ieee" to keep fp32.
# The seed's grid:
# kevo: grid hmc_step = (cdiv(K, BLOCK),)

# ising entry point for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may follow.
import triton
import triton.language as tl


@triton.jit
def ising_step(spins,     # 0: *i8 [NX*NY], read/write in place, +1/-1; site = j*NX + i
               p_accept,  # 1: *fp32 [5], read
               NX,        # 2: u32, columns (fast axis i), even
               NY,        # 3: u32, rows (j), even
               step_idx,  # 4: u32, sub-pass 0 .. 2*n_sweeps-1 (colour = step_idx & 1)
               seed,      # 5: u32, RNG seed
               BLOCK: tl.constexpr = 256):
    ...

# Launch: 2*n_sweeps launches per run, all in place on spins; only sites of
# the launch's colour may be written. Hash arithmetic is uint32 (wrapping):
# cast with .to(tl.uint32) before mixing. The seed's grid:
# kevo: grid ising_step = (cdiv(NX, BLOCK), NY)

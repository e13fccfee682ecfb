# nbody entry point for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may follow.
import triton
import triton.language as tl


@triton.jit
def nbody_step(pos_in,   # 0: *fp32 [4*N], read: float4 per body, body i at 4*i .. 4*i+3 (xyz, pad)
               pos_out,  # 1: *fp32 [4*N], write (w = 0)
               vel_in,   # 2: *fp32 [4*N], read (xyz, pad)
               vel_out,  # 3: *fp32 [4*N], write (w = 0)
               mass,     # 4: *fp32 [N], read
               N,        # 5: u32, bodies
               dt,       # 6: fp32, 1e-3
               eps,      # 7: fp32, 0.05 (softening)
               G,        # 8: fp32, 1.0
               BLOCK_I: tl.constexpr = 64, BLOCK_J: tl.constexpr = 64):
    ...

# Launch: n_steps launches per run; (pos, vel) buffers swap together between
# steps. The seed's grid:
# kevo: grid nbody_step = (cdiv(N, BLOCK_I),)

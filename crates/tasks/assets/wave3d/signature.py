# wave3d entry point for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may follow.
import triton
import triton.language as tl


@triton.jit
def wave_step(u_prev,  # 0: *fp32, read, state at t-1
              u_curr,  # 1: *fp32, read, state at t
              u_next,  # 2: *fp32, write, state at t+1
              NX,      # 3: u32, fast axis (i)
              NY,      # 4: u32, middle axis (j)
              NZ,      # 5: u32, slow axis (k)
              alpha,   # 6: fp32, 0.18
              BLOCK: tl.constexpr = 256):
    ...

# Layout: idx = (k*NY + j)*NX + i. n_steps launches per run over three
# buffers [A, B, C]: step s passes prev = bufs[s%3], curr = bufs[(s+1)%3],
# next = bufs[(s+2)%3]. The seed's grid (axes 1 and 2 up to 65535):
# kevo: grid wave_step = (cdiv(NX, BLOCK), NY, NZ)

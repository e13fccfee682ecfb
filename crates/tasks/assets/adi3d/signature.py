# adi3d entry points for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may
# follow. All three have the same parameters; per step they run x, y, z.
import triton
import triton.language as tl


@triton.jit
def adi_x(u_in,   # 0: *fp32 [NX*NY*NZ], read
          u_out,  # 1: *fp32 [NX*NY*NZ], write
          NX,     # 2: u32, fast axis (i)
          NY,     # 3: u32 (j)
          NZ,     # 4: u32, slow axis (k)
          mu,     # 5: fp32, 0.5
          BLOCK: tl.constexpr = 64):
    ...  # solves the lines along i (one per (j, k))


@triton.jit
def adi_y(u_in, u_out, NX, NY, NZ, mu, BLOCK: tl.constexpr = 64):
    ...  # lines along j (stride NX), one per (i, k)


@triton.jit
def adi_z(u_in, u_out, NX, NY, NZ, mu, BLOCK: tl.constexpr = 64):
    ...  # lines along k (stride NX*NY), one per (i, j)

# Element (i, j, k) is at (k*NY + j)*NX + i. Sweeps ping-pong A -> B -> A ...
# with a running counter over all 3*n_steps launches. Line lengths vary per
# launch (up to 576 at the large sizes). The seed's grids (one lane per line):
# kevo: grid adi_x = (cdiv(NY, BLOCK), NZ)
# kevo: grid adi_y = (cdiv(NX, BLOCK), NZ)
# kevo: grid adi_z = (cdiv(NX, BLOCK), NY)

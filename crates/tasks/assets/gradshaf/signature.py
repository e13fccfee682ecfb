# gradshaf entry points for Triton (argument order and names are the
# contract; scalars arrive by value). tl.constexpr parameters (with defaults)
# may follow. Run once per outer step, in this order:
import triton
import triton.language as tl


@triton.jit
def gradshaf_axis_reduce(psi,       # 0: *fp32 [NR*NZ], read (idx = j*NR + i)
                         psi_axis,  # 1: *fp32 [1], write: max of psi over the interior
                         NR,        # 2: u32, R points (fast axis i)
                         NZ,        # 3: u32, Z points (j)
                         RBLOCK: tl.constexpr = 8192):
    ...


@triton.jit
def gradshaf_step(psi_in,    # 0: *fp32 [NR*NZ], read
                  psi_out,   # 1: *fp32 [NR*NZ], write
                  psi_axis,  # 2: *fp32 [1], read (written by the reduce just before)
                  NR,        # 3: u32
                  NZ,        # 4: u32
                  Rmin,      # 5: fp32, 1.0
                  dR,        # 6: fp32, 1/(NR-1)
                  dZ,        # 7: fp32, 1/(NZ-1)
                  p_axis,    # 8: fp32, 200
                  mu0,       # 9: fp32, 1
                  omega,     # 10: fp32, 1
                  BLOCK: tl.constexpr = 256):
    ...

# Launch: psi ping-pongs A -> B -> A ... between steps; psi_axis is one f32
# that starts as NaN (each step's reduce must write it). The seed's grids
# (a single program does the whole reduction):
# kevo: grid gradshaf_axis_reduce = (1,)
# kevo: grid gradshaf_step = (cdiv(NR, BLOCK), NZ)

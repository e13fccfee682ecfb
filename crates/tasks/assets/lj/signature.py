# lj entry points for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may
# follow. Run once per step, in this order:
import triton
import triton.language as tl


@triton.jit
def lj_clear_cells(cell_count,  # 0: *u32 [M^3], set to 0
                   M3,          # 1: u32, M*M*M
                   BLOCK: tl.constexpr = 256):
    ...


@triton.jit
def lj_build_cells(pos,           # 0: *fp32 [4*N], read: float4 per particle (xyz, .w = 0)
                   cell_count,    # 1: *u32 [M^3], atomic counters (tl.atomic_add returns the old value)
                   cell_list,     # 2: *u32 [M^3 * 64], slot s of cell c at c*64 + s
                   N,             # 3: u32, particles
                   M,             # 4: u32, cells per side
                   L,             # 5: fp32, box side
                   MAX_PER_CELL,  # 6: u32, 64
                   BLOCK: tl.constexpr = 128):
    ...


@triton.jit
def lj_step(pos_in,        # 0: *fp32 [4*N], read
            pos_out,       # 1: *fp32 [4*N], write (.w = 0)
            vel_in,        # 2: *fp32 [4*N], read
            vel_out,       # 3: *fp32 [4*N], write (.w = 0)
            cell_count,    # 4: *u32 [M^3], read
            cell_list,     # 5: *u32 [M^3 * 64], read
            N,             # 6: u32
            M,             # 7: u32
            L,             # 8: fp32
            rcut2,         # 9: fp32, 6.25
            dt,            # 10: fp32, 0.005
            MAX_PER_CELL,  # 11: u32, 64
            BLOCK: tl.constexpr = 64):
    ...

# Per step: clear, build, step; pos/vel ping-pong A -> B -> A ... (step s
# reads A when s is even). Each launch's grid is evaluated from its own
# scalars. The seed's grids:
# kevo: grid lj_clear_cells = (cdiv(M3, BLOCK),)
# kevo: grid lj_build_cells = (cdiv(N, BLOCK),)
# kevo: grid lj_step = (cdiv(N, BLOCK),)

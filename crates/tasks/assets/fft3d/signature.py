# fft3d entry points for Triton (argument order and names are the contract;
# scalars arrive by value). tl.constexpr parameters (with defaults) may
# follow. All three have the same parameters and run once per transform, in
# this order: fft3d_x (A -> B), fft3d_y (B -> A), fft3d_z (A -> B).
import triton
import triton.language as tl


@triton.jit
def fft3d_x(in_data,   # 0: *fp32 [2*N^3], read: float2 (re, im) element e at 2*e, 2*e+1
            out_data,  # 1: *fp32 [2*N^3], write
            N,         # 2: u32, power of two (<= 1024)
            BLOCK: tl.constexpr = 512):
    ...  # every line along i (stride 1), one per (j, k)


@triton.jit
def fft3d_y(in_data, out_data, N, BLOCK: tl.constexpr = 512):
    ...  # every line along j (stride N), one per (i, k)


@triton.jit
def fft3d_z(in_data, out_data, N, BLOCK: tl.constexpr = 512):
    ...  # every line along k (stride N*N), one per (i, j)

# Element (i, j, k) is at (k*N + j)*N + i. Some sizes repeat the transform R
# times (3R launches alternating A/B): take input and output from the
# arguments. N may be up to 1024, where 2*N^3 floats pass 2^31: the seed uses
# 64-bit offsets. A program may own whole lines and use tl.debug_barrier()
# between its own stages. The seed's grids (one lane per butterfly, N/2 per line):
# kevo: grid fft3d_x = (cdiv(N * N * (N // 2), BLOCK),)
# kevo: grid fft3d_y = (cdiv(N * N * (N // 2), BLOCK),)
# kevo: grid fft3d_z = (cdiv(N * N * (N // 2), BLOCK),)

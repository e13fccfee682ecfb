"""Correct but unusual: many corners of the kernel language in one saxpy,
all of which the module check must accept: libdevice imported two ways,
math constants, module tl.constexpr values (a tuple, a dtype), a jit
function passed as a tl.constexpr (to tl.reduce and to a helper), a
dtype default, a string constexpr, f-strings in static assertions,
tl.static_print, tl.PropagateNan, triton.cdiv/next_power_of_2, a
decorator with do_not_specialize, tl.static_range and tl.range, and a
device print that never runs."""
import math
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice
from triton import cdiv

SCALE = tl.constexpr(2.0)
DT = tl.float32
NAMES = tl.constexpr(("x", "y"))
PI = tl.constexpr(math.pi)
HALF = tl.constexpr(0.5 * 1)

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def add(a, b):
    return a + b


@triton.jit
def twice(v, f: tl.constexpr):
    return f(v, v)


@triton.jit(do_not_specialize=["N"], noinline=False)
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 256, MODE: tl.constexpr = "fast",
          DTYPE: tl.constexpr = tl.float32):
    tl.static_assert(BLOCK % 32 == 0, f"BLOCK={BLOCK} must be a multiple of 32")
    tl.static_print("compiling", BLOCK, MODE)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    xv = tl.load(x + i, mask=m, other=0.0).to(DTYPE)
    yv = tl.load(y + i, mask=m, other=0.0)
    zero = tl.sum(xv, axis=0) * 0.0 + tl.reduce(xv, 0, add) * 0.0 + tl.cumsum(xv, 0) * 0.0
    zero += libdevice.exp(xv * 0.0) - 1.0 + cuda_libdevice.exp2(xv * 0.0) - 1.0
    zero += tl.math.sqrt(tl.abs(xv)) * 0.0
    zero += tl.maximum(xv, xv, propagate_nan=tl.PropagateNan.ALL) * 0.0
    zero += PI * 0.0 + math.e * 0.0 + SCALE * 0.0 + HALF * 0.0 + twice(xv, add) * 0.0
    w = xv.dtype.primitive_bitwidth + len(NAMES) + triton.cdiv(7, 2) + cdiv(7, 2) + triton.next_power_of_2(5)
    t = (xv, yv)
    if MODE == "fast":
        out = a * t[0] + t[1]
    else:
        out = tl.fma(a, xv, yv)
    for j in tl.static_range(2):
        out = out + 0.0 * j
    for j in tl.range(0, 2, num_stages=1):
        out = out + 0.0
    n = N.to(tl.int32)
    if n < 0:
        tl.device_print("negative", n)
    acc = tl.zeros([BLOCK], dtype=DT)
    acc += out
    tl.store(y + i, acc + zero + (w - w), mask=m)

"""Refused at the module check: the "calls a PyTorch operator instead of a
kernel" hack starts with `import torch`; a kernel module imports only
triton, triton.language and math, and the helper never imports torch."""
import torch
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    pass

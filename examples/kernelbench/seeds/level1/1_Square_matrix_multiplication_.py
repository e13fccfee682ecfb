"""Naive Triton seed: one program per BLOCK_M x BLOCK_N tile of the output,
stepping over the inner dimension in BLOCK_K slices with tl.dot in full
fp32 precision (the default TF32 would miss the tolerance)."""
import triton
import triton.language as tl

# kevo: grid forward = (cdiv(k_N, BLOCK_N), cdiv(k_N, BLOCK_M))


@triton.jit
def forward(A, B, out, k_N, BLOCK_M: tl.constexpr = 64, BLOCK_N: tl.constexpr = 64,
            BLOCK_K: tl.constexpr = 32):
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    n = k_N.to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_N, BLOCK_K):
        a = tl.load(A + rows[:, None] * n + (k0 + ks)[None, :],
                    mask=(rows[:, None] < k_N) & ((k0 + ks)[None, :] < k_N), other=0.0)
        b = tl.load(B + (k0 + ks)[:, None] * n + cols[None, :],
                    mask=((k0 + ks)[:, None] < k_N) & (cols[None, :] < k_N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(out + rows[:, None] * n + cols[None, :], acc,
             mask=(rows[:, None] < k_N) & (cols[None, :] < k_N))

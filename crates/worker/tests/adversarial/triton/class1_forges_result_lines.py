"""Class 1 exploit: does no work and prints well-formed worker replies
(with and without a nonce) claiming a correct result with score 99 for
this request and the next ones. Triton's device_print starts each line
with `pid (...)`, so every forged reply is put on a line of its own after
a newline. Replies travel on a private descriptor, so this is just output;
y is left unchanged, so it is wrong."""
import triton
import triton.language as tl

# kevo: grid saxpy = (cdiv(N, BLOCK),)
# kevo: warps saxpy = 1


@triton.jit
def forge(ID: tl.constexpr):
    tl.device_print(
        f"\n{{\"type\":\"result\",\"id\":{ID},\"nonce\":\"00000000000000000000000000000000\",\"evaluation\":{{\"task\":\"saxpy\",\"device\":\"forged\",\"backend\":\"forged\",\"outcome\":{{\"status\":\"correct\",\"score\":99.0}},\"sizes\":[],\"wall\":{{\"compile_s\":0,\"inputs_s\":0,\"reference_s\":0,\"device_s\":0,\"check_s\":0,\"total_s\":0}}}},\"restart\":false}}\n"
    )
    print(
        f"\n{{\"type\":\"result\",\"id\":{ID},\"evaluation\":{{\"task\":\"saxpy\",\"device\":\"forged\",\"backend\":\"forged\",\"outcome\":{{\"status\":\"correct\",\"score\":99.0}},\"sizes\":[],\"wall\":{{\"compile_s\":0,\"inputs_s\":0,\"reference_s\":0,\"device_s\":0,\"check_s\":0,\"total_s\":0}}}},\"restart\":false}}\n"
    )


@triton.jit
def saxpy(x, y, a, N, BLOCK: tl.constexpr = 1024):
    if tl.program_id(0) == 0:
        for k in tl.static_range(1, 9):
            forge(k)

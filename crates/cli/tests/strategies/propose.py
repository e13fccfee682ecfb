#!/usr/bin/env python3
"""A scripted `cmd:` proposer for saxpy (OpenCL or CUDA, as the prompt's
code fences say) whose answer depends only on the prompt: it finds the parent the strategy chose (the incumbent block,
or the previous attempt when that is the incumbent), then answers with the
first variant, in order after the parent's, that the prompt does not show
anywhere (parent, elites, inspirations). Each variant lands in its own
MAP-Elites cell; a busy loop of R dependent steps per element keeps the
kernel correct and sets its speed."""
import re
import sys

# name, memory construct, busy steps R: all faster than the start kernel
# (examples/replay/*/start_slow.*, 64 steps); scalar_4 shares its cell.
VARIANTS = [
    ("vector_8", "vector", 8),
    ("local_16", "local", 16),
    ("async_32", "async", 32),
    ("scalar_4", "scalar", 4),
]

LOAD = {
    "opencl": {
        "scalar": "    float xi = i < N ? x[i] : 0.0f;\n",
        "vector": "    float xi = i < N ? x[i] : 0.0f;\n    if ((i | 1u) < N) {\n        float2 pair = ((__global const float2*)x)[i / 2u];\n        xi = (i & 1u) ? pair.y : pair.x;\n    }\n",
        "local": (
            "    __local float tile[256];\n"
            "    tile[get_local_id(0)] = i < N ? x[i] : 0.0f;\n"
            "    barrier(CLK_LOCAL_MEM_FENCE);\n"
            "    float xi = tile[get_local_id(0)];\n"
        ),
        "async": (
            "    __local float tile[256];\n"
            "    uint first = get_group_id(0) * get_local_size(0);\n"
            "    uint count = first < N ? min((uint)get_local_size(0), N - first) : 0u;\n"
            "    event_t e = async_work_group_copy(tile, x + first, count, 0);\n"
            "    wait_group_events(1, &e);\n"
            "    float xi = i < N ? tile[get_local_id(0)] : 0.0f;\n"
        ),
    },
    "cuda": {
        "scalar": "    float xi = i < N ? x[i] : 0.0f;\n",
        "vector": "    float xi = i < N ? __ldg(x + i) : 0.0f;\n",
        "local": (
            "    __shared__ float tile[256];\n"
            "    tile[threadIdx.x] = i < N ? x[i] : 0.0f;\n"
            "    __syncthreads();\n"
            "    float xi = tile[threadIdx.x];\n"
        ),
        "async": (
            "    __shared__ float tile[256];\n"
            "    if (i < N) {\n"
            "        unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(&tile[threadIdx.x]));\n"
            '        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\\n" :: "r"(dst), "l"(x + i));\n'
            "    }\n"
            '    asm volatile("cp.async.commit_group;\\n" ::);\n'
            '    asm volatile("cp.async.wait_group 0;\\n" ::);\n'
            "    __syncthreads();\n"
            "    float xi = i < N ? tile[threadIdx.x] : 0.0f;\n"
        ),
    },
}

HEAD = {
    "opencl": (
        "__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {\n"
        "    uint i = get_global_id(0);\n"
    ),
    "cuda": (
        'extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {\n'
        "    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    ),
}


def kernel(dialect, name, memory, steps):
    return (
        f"// variant: {name}\n"
        f"{HEAD[dialect]}"
        f"{LOAD[dialect][memory]}"
        "    float busy = xi;\n"
        f"    for (int k = 0; k < {steps}; ++k) busy = busy * 0.999f + 0.001f;\n"
        "    if (i < N) y[i] = a * xi + y[i] + busy * 1e-30f;\n"
        "}\n"
    )


def block_after(text, heading):
    at = text.find(heading)
    if at < 0:
        return None
    m = re.search(r"```(?:opencl|cuda)\n(.*?)```", text[at:], re.S)
    return m.group(1) if m else None


def main():
    prompt = sys.stdin.read()
    user = prompt.split("<<<USER>>>", 1)[-1]
    parent = (
        block_after(user, "## Current best (incumbent)")
        or block_after(user, "## Parent chosen by the search")
        or block_after(user, "## Baseline")
        or block_after(user, "## Your previous attempt")
        or ""
    )
    m = re.search(r"// variant: (\w+)", parent)
    names = [v[0] for v in VARIANTS]
    start = names.index(m.group(1)) + 1 if m else 0
    order = [VARIANTS[(start + k) % len(VARIANTS)] for k in range(len(VARIANTS))]
    shown = set(re.findall(r"// variant: (\w+)", user))
    choice = next((v for v in order if v[0] not in shown), order[0])
    dialect = "cuda" if "```cuda" in user else "opencl"
    print(f"Variant {choice[0]}.\n\n```{dialect}\n{kernel(dialect, *choice)}```")


main()

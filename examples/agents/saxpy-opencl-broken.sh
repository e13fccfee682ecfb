#!/bin/sh
# A stand-in model whose kernels never compile (the model-bandit example's
# bad model: `--llm cmd:examples/agents/saxpy-opencl-broken.sh`).
cat >/dev/null
echo '```opencl'
cat <<'K'
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    y[i] = a * x[i] + y[i];
}
K
echo '```'

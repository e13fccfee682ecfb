#!/bin/sh
# A stand-in model for the model-bandit example (`--llm
# cmd:examples/agents/saxpy-opencl-improving.sh`): it reads the prompt,
# finds the smallest busy loop among the kernels it is shown (the
# incumbent's, `k < N;`), and answers the same OpenCL saxpy with half as
# many dependent FMAs per element, so its candidates keep improving on
# their parents until the loop no longer dominates.
prompt=$(cat)
n=$(printf '%s\n' "$prompt" | grep -o 'k < [0-9]*;' | grep -o '[0-9][0-9]*' | sort -n | head -n 1)
[ -z "$n" ] && n=256
loops=$((n / 2))
echo "Halving the busy loop from ${n} to ${loops} FMAs per element."
echo '```opencl'
cat <<K
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    float busy = x[i];
    for (int k = 0; k < ${loops}; ++k) busy = busy * 0.999f + 0.001f;
    y[i] = a * x[i] + y[i] + busy * 1e-30f;
}
K
echo '```'

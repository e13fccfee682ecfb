#!/bin/sh
# A stand-in model for the model-bandit example (`--llm
# cmd:examples/agents/saxpy-opencl-improving.sh`): each call answers an
# OpenCL saxpy that burns half as many dependent FMAs per element as its
# previous answer (128, 64, ... down to none), so its candidates keep
# improving on their parents until the loop no longer dominates. Its call
# count lives in $KEVO_EXAMPLE_STATE (default /tmp) as improving.count.
cat >/dev/null
state="${KEVO_EXAMPLE_STATE:-/tmp}/improving.count"
c=$(cat "$state" 2>/dev/null || echo 0)
echo $((c + 1)) > "$state"
loops=$((128 >> c))
echo "Halving the busy loop to ${loops} FMAs per element."
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

// Sandbox: a token-pasted probe; #if uses a macro that pastes
// __has_ and include. Refused.
#define KEVO_CAT(a, b) a##b
#define KEVO_PROBE KEVO_CAT(__has_, include)
#if KEVO_PROBE("CANARY_PATH")
#define FOUND 1
#endif
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

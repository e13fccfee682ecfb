// Sandbox: #embed (C23) would put the file's bytes in the program.
// Refused.
const unsigned char kevo_canary[] = {
#embed "CANARY_PATH"
};
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    if (i >= N) return;
    y[i] = a * x[i] + y[i];
}

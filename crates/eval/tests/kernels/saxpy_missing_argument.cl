// Wrong on purpose: drops the N argument, so the host's four arguments do not fit.
__kernel void saxpy(__global const float* x, __global float* y, float a) {
    uint i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}

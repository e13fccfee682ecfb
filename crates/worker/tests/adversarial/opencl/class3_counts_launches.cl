// Class 3 exploit: count launches in a word past the end of y and do the
// work only from launch 12 on: with 3 warm-ups and 10 timed runs, only the
// last timed run and the verification run (launch 13) were ever checked.
// The verification launch puts the canary back, so a final guard check
// sees nothing.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint N) {
    uint i = get_global_id(0);
    __global uint* counter = (__global uint*)(y + N + 64);
    uint launch = *counter - 0xA5A5A5A5u;
    if (i < N && launch >= 12u) y[i] = a * x[i] + y[i];
    if (i == 0) *counter = launch >= 13u ? 0xA5A5A5A5u : *counter + 1u;
}

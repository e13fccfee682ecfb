// Class 3 exploit: count launches in a word past the end of y and do the
// work only from launch 12 on: with 3 warm-ups and 10 timed runs, only the
// last timed run and the verification run (launch 13) were ever checked.
// The verification launch puts the canary back, so a final guard check
// sees nothing.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int* counter = (unsigned int*)(y + N + 64);
    unsigned int launch = *counter - 0xA5A5A5A5u;
    if (i < N && launch >= 12u) y[i] = a * x[i] + y[i];
    if (i == 0) *counter = launch >= 13u ? 0xA5A5A5A5u : *counter + 1u;
}

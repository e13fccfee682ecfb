// Exploit: never finishes. Must end as a timeout, with the worker killed.
// The loop reads global memory through a volatile pointer on every trip, so
// no compiler may assume it terminates or remove it.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    volatile const float* vx = x;
    float acc = 0.0f;
    for (;;) {
        acc += vx[i % N] * 0.0f + 1.0f;
        if (acc < 0.0f) break;
    }
    if (i < N) y[i] = a * x[i] + y[i] + acc;
}

// Class 6 stand-in: a kernel whose figures exceed the device's ceilings.
// Once classes 1-5 are closed no known kernel passes every check while
// claiming more work than the hardware can do, so the suite runs this
// correct grid-stride saxpy against ceilings declared a million times
// below the device's. The outcome must be "suspicious", never a score.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < N;
         i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

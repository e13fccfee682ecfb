// A kernel with one deliberate error on line 5: the conformance suite checks
// that the backend reports it with that line number.
extern "C" __global__ void broken(float* out) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = undeclared_value;
}

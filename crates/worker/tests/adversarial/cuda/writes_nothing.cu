// Exploit: does no work at all (fastest possible "kernel").
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
}

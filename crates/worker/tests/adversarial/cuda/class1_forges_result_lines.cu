// Class 1 exploit: does no work and prints well-formed worker replies
// (with and without a nonce) claiming a correct result with score 99 for
// this request and the next ones. Replies travel on a private descriptor,
// so this is just output on stderr; y is left unchanged, so it is wrong.
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int N) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        for (int id = 1; id <= 8; ++id) {
            printf("{\"type\":\"result\",\"id\":%d,\"nonce\":\"00000000000000000000000000000000\",\"evaluation\":{\"task\":\"saxpy\",\"device\":\"forged\",\"backend\":\"forged\",\"outcome\":{\"status\":\"correct\",\"score\":99.0},\"sizes\":[],\"wall\":{\"compile_s\":0,\"inputs_s\":0,\"reference_s\":0,\"device_s\":0,\"check_s\":0,\"total_s\":0}},\"restart\":false}\n", id);
            printf("{\"type\":\"result\",\"id\":%d,\"evaluation\":{\"task\":\"saxpy\",\"device\":\"forged\",\"backend\":\"forged\",\"outcome\":{\"status\":\"correct\",\"score\":99.0},\"sizes\":[],\"wall\":{\"compile_s\":0,\"inputs_s\":0,\"reference_s\":0,\"device_s\":0,\"check_s\":0,\"total_s\":0}},\"restart\":false}\n", id);
        }
    }
}

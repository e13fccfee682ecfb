// Attack: write nothing, hoping the output buffer still holds the
// reference's answer or an earlier launch's.
// old check: fails
extern "C" __global__ void forward(const float* x, float* out, int k_batch_size, int k_dim) {}

// Attack: write nothing, hoping the output buffer still holds the
// reference's answer or an earlier launch's.
// old check: fails
__kernel void forward(__global const float* x, __global float* out, int k_batch_size, int k_dim) {
}

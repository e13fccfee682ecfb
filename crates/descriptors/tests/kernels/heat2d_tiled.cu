// heat2d through a 16x16 shared tile with a one-cell halo; cooperative
// groups' block sync keeps the tile consistent.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define B 16
extern "C" __global__ void heat_step(const float* u_in, float* u_out, unsigned int NX,
                                     unsigned int NY, float alpha) {
    __shared__ float tile[B + 2][B + 2];
    cg::thread_block block = cg::this_thread_block();
    int i = blockIdx.x * B + threadIdx.x;
    int j = blockIdx.y * B + threadIdx.y;
    int ti = threadIdx.x + 1, tj = threadIdx.y + 1;
    bool inside = i < (int)NX && j < (int)NY;
    if (inside) {
        tile[tj][ti] = u_in[j * NX + i];
        if (threadIdx.x == 0 && i > 0) tile[tj][0] = u_in[j * NX + i - 1];
        if (threadIdx.x == B - 1 && i + 1 < (int)NX) tile[tj][B + 1] = u_in[j * NX + i + 1];
        if (threadIdx.y == 0 && j > 0) tile[0][ti] = u_in[(j - 1) * NX + i];
        if (threadIdx.y == B - 1 && j + 1 < (int)NY) tile[B + 1][ti] = u_in[(j + 1) * NX + i];
    }
    block.sync();
    if (!inside) return;
    unsigned int idx = j * NX + i;
    if (i == 0 || j == 0 || i == (int)NX - 1 || j == (int)NY - 1) {
        u_out[idx] = u_in[idx];
        return;
    }
    float c = tile[tj][ti];
    u_out[idx] = c + alpha * (tile[tj][ti - 1] + tile[tj][ti + 1] + tile[tj - 1][ti] +
                              tile[tj + 1][ti] - 4.0f * c);
}

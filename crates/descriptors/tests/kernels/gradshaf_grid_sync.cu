// gradshaf's reduction across the whole grid in one cooperative launch:
// per-block maxima through atomicMax on the float's bits, then a grid sync.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void gradshaf_axis_reduce(const float* psi, float* psi_axis,
                                                unsigned int NR, unsigned int NZ) {
    cg::grid_group grid = cg::this_grid();
    unsigned int nri = NR - 2;
    unsigned int total = nri * (NZ - 2);
    unsigned int stride = gridDim.x * blockDim.x;
    float m = -3.402823466e38f;
    for (unsigned int q = blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
        m = fmaxf(m, psi[(1 + q / nri) * NR + 1 + q % nri]);
    }
    // psi is positive inside the plasma: the float's bits order as ints.
    if (m > 0.0f) atomicMax(reinterpret_cast<int*>(psi_axis), __float_as_int(m));
    grid.sync();
}

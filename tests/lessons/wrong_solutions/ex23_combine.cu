// Exercise 23 gone wrong: an off-by-one in the loops over the splits (s < splits - 1), so the
// last split is left out of both the LSE and the weighted sum, and one split gives nothing.
#include "kernels/ex23_combine.cuh"

namespace flashlab::kernel_exercises {

__global__ void __launch_bounds__(ex23::kThreads) ex23_combine_kernel(CombineArgs a) {
  const int r = blockIdx.x;
  const float* gLse = a.lse_splits + r;
  float m = -INFINITY;
  for (int s = 0; s < a.splits - 1; ++s) m = fmaxf(m, gLse[std::size_t(s) * a.rows]);
  float* gO = a.o + std::size_t(r) * a.d;
  if (m == -INFINITY) {
    for (int k = threadIdx.x; k < a.d; k += blockDim.x) gO[k] = 0.0f;
    if (threadIdx.x == 0) a.lse[r] = -INFINITY;
    return;
  }
  float l = 0.0f;
  for (int s = 0; s < a.splits - 1; ++s) l += expf(gLse[std::size_t(s) * a.rows] - m);
  const float lse = m + logf(l);
  for (int k = threadIdx.x; k < a.d; k += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < a.splits - 1; ++s)
      o += expf(gLse[std::size_t(s) * a.rows] - lse) *
           a.o_splits[(std::size_t(s) * a.rows + r) * a.d + k];
    gO[k] = o;
  }
  if (threadIdx.x == 0) a.lse[r] = lse;
}

}  // namespace flashlab::kernel_exercises

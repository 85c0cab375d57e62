// Solution to exercise 23: every thread finds the row's LSE (a few splits: cheaper to
// recompute than to share), then each thread weighs its columns of the splits' outputs.
#include "kernels/ex23_combine.cuh"

namespace flashlab::kernel_exercises {

__global__ void __launch_bounds__(ex23::kThreads) ex23_combine_kernel(CombineArgs a) {
  const int r = blockIdx.x;
  const float* gLse = a.lse_splits + r;  // split s at gLse[s * rows]
  float m = -INFINITY;
  for (int s = 0; s < a.splits; ++s) m = fmaxf(m, gLse[std::size_t(s) * a.rows]);
  float* gO = a.o + std::size_t(r) * a.d;  // (d)
  if (m == -INFINITY) {                    // no split saw a key: exp(-inf - (-inf)) would be NaN
    for (int k = threadIdx.x; k < a.d; k += blockDim.x) gO[k] = 0.0f;
    if (threadIdx.x == 0) a.lse[r] = -INFINITY;
    return;
  }
  float l = 0.0f;
  for (int s = 0; s < a.splits; ++s) l += expf(gLse[std::size_t(s) * a.rows] - m);
  const float lse = m + logf(l);
  for (int k = threadIdx.x; k < a.d; k += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < a.splits; ++s)
      o += expf(gLse[std::size_t(s) * a.rows] - lse) *
           a.o_splits[(std::size_t(s) * a.rows + r) * a.d + k];
    gO[k] = o;
  }
  if (threadIdx.x == 0) a.lse[r] = lse;
}

}  // namespace flashlab::kernel_exercises

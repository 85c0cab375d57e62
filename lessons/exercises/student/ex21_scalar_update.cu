// Exercise 21: the online-softmax update inside the scalar kernel. Contract and kernel:
// lessons/exercises/kernels/ex21_scalar_forward.cuh. Check with `flashlab check 21`.
#include "kernels/ex21_scalar_forward.cuh"

namespace flashlab::kernel_exercises {

__device__ void online_softmax_update(RowState& state, float* sS_row, const float* sV, int d) {
  // TODO: fold this tile (scores sS_row, values sV) into the row's state (m, l, U), then
  // delete the next line.
  (void)state, (void)sS_row, (void)sV, (void)d;
  not_written_yet();
}

}  // namespace flashlab::kernel_exercises

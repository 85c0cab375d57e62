// Exercise 21 gone wrong: l is rescaled by alpha but U is not, so the old tiles' weights keep
// their old base. Right until the max grows between two tiles, which it does in nearly every
// row of more than one tile.
#include "kernels/ex21_scalar_forward.cuh"

namespace flashlab::kernel_exercises {

__device__ void online_softmax_update(RowState& state, float* sS_row, const float* sV, int d) {
  using ex21::kBc;
  float tile_max = -INFINITY;
  for (int c = 0; c < kBc; ++c) tile_max = fmaxf(tile_max, sS_row[c]);
  if (tile_max == -INFINITY) return;
  const float m_new = fmaxf(state.m, tile_max);
  const float alpha = expf(state.m - m_new);
  float row_sum = 0.0f;
  for (int c = 0; c < kBc; ++c) {
    sS_row[c] = expf(sS_row[c] - m_new);
    row_sum += sS_row[c];
  }
  state.l = alpha * state.l + row_sum;
  for (int c = 0; c < kBc; ++c) {
#pragma unroll
    for (int k = 0; k < kMaxD; ++k)
      if (k < d) state.U[k] += sS_row[c] * sV[c * d + k];  // U never multiplied by alpha
  }
  state.m = m_new;
}

}  // namespace flashlab::kernel_exercises

// Solution to exercise 21: the new tile's scores are exponentiated against the new base m',
// and only the old state (l, U) is rescaled, by alpha = exp(m - m').
#include "kernels/ex21_scalar_forward.cuh"

namespace flashlab::kernel_exercises {

__device__ void online_softmax_update(RowState& state, float* sS_row, const float* sV, int d) {
  using ex21::kBc;
  float tile_max = -INFINITY;
  for (int c = 0; c < kBc; ++c) tile_max = fmaxf(tile_max, sS_row[c]);
  if (tile_max == -INFINITY) return;  // no visible key here: nothing to add, and no NaN
  const float m_new = fmaxf(state.m, tile_max);
  const float alpha = expf(state.m - m_new);  // exp(-inf) = 0 on the row's first visible tile
  float row_sum = 0.0f;
  for (int c = 0; c < kBc; ++c) {
    const float W = expf(sS_row[c] - m_new);  // 0 for a masked key
    sS_row[c] = W;
    row_sum += W;
  }
  state.l = alpha * state.l + row_sum;
#pragma unroll
  for (int k = 0; k < kMaxD; ++k)
    if (k < d) state.U[k] *= alpha;
  for (int c = 0; c < kBc; ++c) {
    const float W = sS_row[c];
#pragma unroll
    for (int k = 0; k < kMaxD; ++k)
      if (k < d) state.U[k] += W * sV[c * d + k];
  }
  state.m = m_new;
}

}  // namespace flashlab::kernel_exercises

// The parts of the exercises' forward kernels that are given, not asked for: loading rows of
// a matrix into SRAM, one row of scores, and the final O = U / l, L = m + log l. Exercises 21
// and 22 build their kernels from them; read them, there is nothing to write here.
#pragma once

#include "kernels/common.cuh"

namespace flashlab::kernel_exercises {

// Copies rows [row0, row0 + rows) of an (n_rows, d) matrix in HBM into SRAM, d floats apart;
// rows past n_rows become zeros. Every thread of the block takes a share.
__device__ __forceinline__ void load_rows(float* sX, const float* gX, int row0, int rows,
                                          int n_rows, int d) {
  for (int idx = threadIdx.x; idx < rows * d; idx += blockDim.x) {
    const int r = idx / d;
    sX[idx] = row0 + r < n_rows ? gX[std::size_t(row0) * d + idx] : 0.0f;
  }
}

// S = q K_j^T * scale for one query row against a tile of `cols` keys starting at key k0:
// sS_row (cols) from sQ_row (d) and sK (cols, d). Keys that are masked or past N_k get -inf.
__device__ __forceinline__ void row_scores(float* sS_row, const float* sQ_row, const float* sK,
                                           int cols, int row, int k0, const ForwardArgs& a) {
  for (int c = 0; c < cols; ++c) {
    float dot = 0.0f;
    for (int k = 0; k < a.d; ++k) dot += sQ_row[k] * sK[c * a.d + k];
    sS_row[c] = is_masked(a, row, k0 + c) ? -INFINITY : dot * a.scale;
  }
}

// The state of a row that has seen no key: m = -inf, l = 0, U = 0.
__device__ __forceinline__ void init_state(RowState& state) {
  state.m = -INFINITY;
  state.l = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxD; ++k) state.U[k] = 0.0f;
}

// O = U / l and L = m + log l for one row; a row that saw no key gets O = 0 and L = -inf
// (flashlab's convention, instead of 0 / 0).
__device__ __forceinline__ void finalize_row(const RowState& state, float* gO_row, float* gL_row,
                                             int d) {
  const float inv_l = state.l > 0.0f ? 1.0f / state.l : 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxD; ++k)  // unrolled with a guard, so U stays in registers
    if (k < d) gO_row[k] = state.U[k] * inv_l;
  *gL_row = state.l > 0.0f ? state.m + logf(state.l) : -INFINITY;
}

}  // namespace flashlab::kernel_exercises

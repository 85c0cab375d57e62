// Exercise 21 (lesson 3): the online-softmax update inside the scalar kernel.
//
// The kernel below is whole except for one function, online_softmax_update(), which you
// write in lessons/exercises/student/ex21_scalar_update.cu. Each block takes ex21::kBr query
// rows, one thread per row; it sweeps the keys in tiles of ex21::kBc, staged in SRAM by the
// whole block, and each thread keeps its row's state (m, l, U) in registers (RowState,
// kernels/common.cuh). For every tile, the thread computes its row of scores and then calls
// your function, which folds the tile into the state.
//
// The contract of online_softmax_update(state, sS_row, sV, d):
//   sS_row (kBc)   this row's scores S against the tile's keys, already scaled; -inf for a key
//                  that is masked (causal) or past the last key (the last tile is ragged).
//                  Yours to overwrite: the kernel reads it no more after your call.
//   sV (kBc, d)    the tile's values in SRAM, row-major, d floats apart; zeros past the last key.
//   state          the row's (m, l, U) over every earlier tile; leave it as the state over
//                  those tiles and this one:
//     m' = max(m, rowmax S);  alpha = exp(m - m');  W = exp(S - m')
//     l  = alpha l + rowsum W;  U = alpha U + W V;  m = m'
//   - a tile whose scores are all -inf leaves the state as it was (before the row's first
//     visible key, m = -inf, and exp(m - m') would be exp(-inf - (-inf)) = NaN);
//   - nothing may overflow: the scores may be in the hundreds;
//   - U has kMaxD entries, of which the first d are used. Loops over U written as
//     `#pragma unroll` over kMaxD with an `if (k < d)` inside keep U in registers; a loop to d
//     puts U in local memory (slower, still right).
// The kernel then writes O = U / l and L = m + log l. `flashlab check 21` runs it on the GPU
// against the CPU reference, fp32 throughout.
#pragma once

#include "kernels/scaffold.cuh"

namespace flashlab::kernel_exercises {

__device__ void online_softmax_update(RowState& state, float* sS_row, const float* sV, int d);

__global__ void __launch_bounds__(ex21::kBr) ex21_scalar_forward_kernel(ForwardArgs a) {
  using ex21::kBc;
  using ex21::kBr;
  extern __shared__ float sram[];
  const int d = a.d;
  float* sQ = sram;          // (Br, d)
  float* sK = sQ + kBr * d;  // (Bc, d)
  float* sV = sK + kBc * d;  // (Bc, d)
  float* sS = sV + kBc * d;  // (Br, Bc + 1): a row of scores per thread

  const int q0 = blockIdx.x * kBr;
  const int row = q0 + threadIdx.x;  // this thread's query row
  load_rows(sQ, a.q, q0, kBr, a.n_q, d);

  RowState state;
  init_state(state);
  const int n_keys = visible_keys(a, min(q0 + kBr, a.n_q) - 1);
  for (int k0 = 0; k0 < n_keys; k0 += kBc) {
    __syncthreads();  // every thread is done with the previous tile (and sQ is written)
    load_rows(sK, a.k, k0, kBc, a.n_k, d);
    load_rows(sV, a.v, k0, kBc, a.n_k, d);
    __syncthreads();  // the tile is in SRAM for every thread

    float* sS_row = sS + threadIdx.x * (kBc + 1);  // (Bc)
    row_scores(sS_row, sQ + threadIdx.x * d, sK, kBc, row, k0, a);
    online_softmax_update(state, sS_row, sV, d);
  }
  if (row < a.n_q) finalize_row(state, a.o + std::size_t(row) * d, a.lse + row, d);
}

// Asked by the harness after the launch: whether the skeleton's not_written_yet() ran.
bool ex21_not_written() { return read_not_written(); }

}  // namespace flashlab::kernel_exercises

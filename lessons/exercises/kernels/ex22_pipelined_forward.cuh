// Exercise 22 (lesson 8): double buffering with cp.async: load KV tile j + 1 while computing
// tile j.
//
// The scalar kernel of exercise 21 loads a tile, waits for it, computes, and only then loads
// the next: the SMs idle while HBM answers. Here SRAM holds two stages for K and V, and tile
// j lives in stage j % 2, so the copy of tile j + 1 can fly while tile j is computed. The
// pieces are given (Pipeline below); you write their order, in kv_tile_loop(), in
// lessons/exercises/student/ex22_pipelined_loop.cu.
//
// The contract of kv_tile_loop(p):
//   - call p.compute_tile(j) once for every j = 0, 1, ..., p.num_tiles - 1, in that order
//     (each thread its own row, every thread of the block the same j's);
//   - p.load_tile_async(j) starts this thread's share of the copies of K_j and V_j into stage
//     j % 2 (cp.async: it does not commit and does not wait). Start tile j + 1's copies before
//     computing tile j;
//   - compute_tile(j) reads the whole stage j % 2, which every thread's copies filled: it may
//     begin only when the copies into it are complete and visible to the thread: this thread's
//     waited for (cp_async_commit() and cp_async_wait<n>(), kernels/common.cuh) and everyone
//     else's too (__syncthreads(): a barrier is not a wait, nor a wait a barrier);
//   - the copy of tile j + 2 overwrites stage j % 2: it may start only when every thread has
//     finished computing tile j from it;
//   - p.num_tiles may be 0 (a causal block whose rows see no key), 1, or many.
// Stages start filled with NaN, so a tile read before its copies landed shows up in the output.
// The device script also runs compute-sanitizer's racecheck on this kernel.
#pragma once

#include "kernels/scaffold.cuh"

namespace flashlab::kernel_exercises {

// One block's pipeline: the SRAM stages, and the thread's query row and its state.
struct Pipeline {
  ForwardArgs a;
  float* sStages;       // kStages x (sK (Bc, d), sV (Bc, d))
  float* sS_row;        // (Bc) this thread's scores, then its weights W
  const float* sQ_row;  // (d) this thread's query
  int row;              // this thread's query row
  int num_tiles;        // KV tiles this block visits
  RowState state;       // (m, l, U) of this thread's row

  // Stage s's K and V tiles. Computed, not looked up in an array of pointers: an array indexed
  // at run time would live in local memory, and with it everything around it.
  __device__ float* sK(int stage) const { return sStages + stage * 2 * ex22::kBc * a.d; }
  __device__ float* sV(int stage) const { return sK(stage) + ex22::kBc * a.d; }

  // Starts this thread's share of the copies of K_j and V_j into stage j % 2; rows past the
  // last key are filled with zeros. Neither commits nor waits.
  __device__ void load_tile_async(int j) {
    const int d = a.d, k0 = j * ex22::kBc, stage = j % ex22::kStages;
    float *sK_j = sK(stage), *sV_j = sV(stage);
    for (int idx = threadIdx.x; idx < ex22::kBc * d; idx += blockDim.x) {
      const bool inside = k0 + idx / d < a.n_k;
      const std::size_t at = inside ? std::size_t(k0) * d + idx : 0;  // a valid address
      cp_async_float(sK_j + idx, a.k + at, inside);
      cp_async_float(sV_j + idx, a.v + at, inside);
    }
  }

  // Computes tile j from stage j % 2: this row's scores, the tile's own softmax state (m_t,
  // l_t, W V), merged into the row's state with the base max(m, m_t), as exercise 2 merges two
  // states (lesson 2).
  __device__ void compute_tile(int j) {
    using ex22::kBc;
    const int d = a.d, stage = j % ex22::kStages;
    const float* sV_j = sV(stage);
    row_scores(sS_row, sQ_row, sK(stage), kBc, row, j * kBc, a);
    float m_t = -INFINITY;
    for (int c = 0; c < kBc; ++c) m_t = fmaxf(m_t, sS_row[c]);
    if (m_t == -INFINITY) return;  // every key of the tile hidden from this row
    const float m_new = fmaxf(state.m, m_t);
    const float alpha = expf(state.m - m_new), beta = expf(m_t - m_new);
    float l_t = 0.0f;
    for (int c = 0; c < kBc; ++c) {
      sS_row[c] = expf(sS_row[c] - m_t);  // W of the tile on its own base
      l_t += sS_row[c];
    }
    state.l = alpha * state.l + beta * l_t;
#pragma unroll
    for (int k = 0; k < kMaxD; ++k) {
      if (k >= d) continue;
      float wv = 0.0f;  // (W V)[k]
      for (int c = 0; c < kBc; ++c) wv += sS_row[c] * sV_j[c * d + k];
      state.U[k] = alpha * state.U[k] + beta * wv;
    }
    state.m = m_new;
  }
};

__device__ void kv_tile_loop(Pipeline& p);

__global__ void __launch_bounds__(ex22::kBr) ex22_pipelined_forward_kernel(ForwardArgs a) {
  using ex22::kBc;
  using ex22::kBr;
  using ex22::kStages;
  extern __shared__ float sram[];
  const int d = a.d;
  Pipeline p;
  p.a = a;
  float* sQ = sram;                               // (Br, d)
  p.sStages = sQ + kBr * d;                       // kStages x 2 x (Bc, d)
  float* sS = p.sStages + kStages * 2 * kBc * d;  // (Br, Bc + 1)
  for (int idx = threadIdx.x; idx < kStages * 2 * kBc * d; idx += blockDim.x)
    p.sStages[idx] = __int_as_float(0x7fffffff);  // NaN in every stage, until a copy lands
  const int q0 = blockIdx.x * kBr;
  load_rows(sQ, a.q, q0, kBr, a.n_q, d);
  __syncthreads();  // sQ and the poisoned stages are written

  p.row = q0 + threadIdx.x;
  p.sS_row = sS + threadIdx.x * (kBc + 1);
  p.sQ_row = sQ + threadIdx.x * d;
  p.num_tiles = (visible_keys(a, min(q0 + kBr, a.n_q) - 1) + kBc - 1) / kBc;
  init_state(p.state);
  kv_tile_loop(p);
  if (p.row < a.n_q) finalize_row(p.state, a.o + std::size_t(p.row) * d, a.lse + p.row, d);
}

// Asked by the harness after the launch: whether the skeleton's not_written_yet() ran.
bool ex22_not_written() { return read_not_written(); }

}  // namespace flashlab::kernel_exercises

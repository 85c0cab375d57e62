// The tiled forward pass in both loop orders. Neither ever holds more than one score
// tile (Br, Bc) of S; both return the same O and L as naive attention, up to rounding.
#pragma once

#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <functional>

namespace flashlab::cpu {

template <class Acc>
struct ForwardResult {
  Matrix<Acc> O;      // (N_q, d)
  Vector<Acc> L;      // (N_q) log-sum-exp, kept for the backward pass
  TileCounts tiles;
};

// One tile, as a trace sees it: which tile, what the update did, and the state of the
// tile's query rows afterwards. Skipped tiles are reported too, with null S, step, state.
template <class Acc>
struct TileEvent {
  Index i = 0, j = 0;         // query tile and KV tile numbers
  Index q0 = 0, k0 = 0;       // their first row and first key
  TileKind kind = TileKind::full;
  const Matrix<Acc>* S = nullptr;             // (rows, cols) the score tile, masked
  const TileStep<Acc>* step = nullptr;        // m_new, alpha, ...
  const SoftmaxState<Acc>* state = nullptr;   // (m, l, U) after the update
};

// Called after each tile, computed or skipped. Giving one makes the forward run serially, in order.
template <class Acc>
using TileObserver = std::function<void(const TileEvent<Acc>&)>;

// FlashAttention-2 order: the outer loop runs over query tiles Q_i (in parallel, OpenMP);
// each keeps its state (m, l, U) on chip while it sweeps every KV tile, and normalises
// once at the end: O_i = U / l, L_i = m + log l.
// Every forward here takes an optional dropout mask: O = (P o Z) V with Z drawn tile by
// tile from the mask (see update()); L stays the log-sum-exp of the undropped scores.
template <class In>
ForwardResult<accum_t<In>> forward_q_outer(const Matrix<In>& Q, const Matrix<In>& K,
                                           const Matrix<In>& V,
                                           const AttentionOptions& options = {},
                                           const TileObserver<accum_t<In>>& observer = {},
                                           const DropoutMask* dropout = nullptr);

// One query tile of the FlashAttention-2 order: rows [q0, q0 + Q_i.rows()) of the full
// problem (q0 places the tile against the causal diagonal). The building block that the
// multi-head forward spreads over threads.
template <class In>
ForwardResult<accum_t<In>> forward_query_tile(MatrixView<In> Q_i, Index q0,
                                              MatrixView<In> K, MatrixView<In> V,
                                              Index n_q, const AttentionOptions& options,
                                              Index tile_number = 0,
                                              const TileObserver<accum_t<In>>& observer = {},
                                              const DropoutMask* dropout = nullptr);

// FlashAttention-1 order, the paper's Algorithm 1: the outer loop runs over KV tiles and
// the inner over query tiles, so every inner step reads O_i, l_i, m_i from memory, merges
// the tile's state into them and writes them back, normalised: O_i = U / l each time.
template <class In>
ForwardResult<accum_t<In>> forward_kv_outer(const Matrix<In>& Q, const Matrix<In>& K,
                                            const Matrix<In>& V,
                                            const AttentionOptions& options = {},
                                            const TileObserver<accum_t<In>>& observer = {},
                                            const DropoutMask* dropout = nullptr);

// Rounds an fp32 result to the input type, as a kernel does when it stores O.
template <class In>
Matrix<In> round_to(const Matrix<accum_t<In>>& X) {
  return X.template cast<In>();
}

}  // namespace flashlab::cpu

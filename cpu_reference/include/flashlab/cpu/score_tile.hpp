// One tile of scores, S_ij = (Q_i * scale) K_j^T, masked in place where it crosses the
// causal diagonal, and the tally of what kind of tile it was: the first step of every
// tiled loop (forward, backward, conditional rescaling, decode).
#pragma once

#include "flashlab/cpu/options.hpp"

namespace flashlab::cpu {

// Q_i_scaled (rows, d) already holds Q_i * scale in the accumulator type; K_j is (cols, d);
// (q0, k0) is the tile's top-left corner in the full score matrix.
template <class In>
Matrix<accum_t<In>> score_tile(MatrixView<accum_t<In>> Q_i_scaled, MatrixView<In> K_j, Index q0,
                               Index k0, TileKind kind, const Mask& mask,
                               const AttentionOptions& options) {
  using Acc = accum_t<In>;
  Matrix<Acc> S = Q_i_scaled * K_j.template cast<Acc>().transpose();  // (rows, cols)
  if (kind == TileKind::partial) mask.apply(S, q0, k0);
  if (options.check_finite) check_scores_finite(S, q0, k0, mask);
  return S;
}

inline void count_tile(TileCounts& counts, TileKind kind) {
  if (kind == TileKind::skipped) {
    ++counts.skipped;
    return;
  }
  ++counts.computed;
  if (kind == TileKind::partial) ++counts.partial;
}

}  // namespace flashlab::cpu

// What a caller says about one attention call, and the check of its inputs.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/types.hpp"

#include <functional>
#include <optional>

namespace flashlab::cpu {

// Br query rows and Bc keys per tile. They need not divide N: the last tile is ragged.
struct TileSizes {
  Index Br = 64;
  Index Bc = 64;
};

// How many tiles of `block` rows cover n rows: Tr = tile_count(N_q, Br), Tc = tile_count(N_k, Bc).
// The last tile is ragged when block does not divide n. Rounded up without forming
// n + block - 1, which overflows for a block near 2^63. Throws InvalidArgument for n < 0 or
// block < 1.
Index tile_count(Index n, Index block);

// How many score tiles were computed, how many of those crossed the causal diagonal and
// were masked in place, and how many lay wholly in the future and were skipped.
struct TileCounts {
  Index computed = 0;
  Index partial = 0;
  Index skipped = 0;

  TileCounts& operator+=(const TileCounts& o) {
    computed += o.computed;
    partial += o.partial;
    skipped += o.skipped;
    return *this;
  }
  Index total() const { return computed + skipped; }
};

struct AttentionOptions {
  Causal causal = Causal::none;
  std::optional<double> scale;  // softmax scale; 1/sqrt(d) when not given
  TileSizes tiles;              // used by the tiled algorithms only
  bool check_finite = false;    // throw NonFiniteScore at the first score that is inf or NaN

  double scale_for(Index d) const;
};

// Throws InvalidArgument, naming what was wrong and what would be right, unless
// Q is (N_q, d), K and V are (N_k, d) with N_q, N_k >= 0 and d >= 1, both tile sizes are
// >= 1, the scale (if given) is positive and finite, and causal is one of its three values.
void check_shapes(Index q_rows, Index q_cols, Index k_rows, Index k_cols, Index v_rows,
                  Index v_cols, const AttentionOptions& options);

// Throws NonFiniteScore naming the first non-finite score of a tile whose top-left corner
// is (q0, k0) in the full score matrix. Masked scores (-inf by design) are not checked.
template <class Acc>
void check_scores_finite(const Matrix<Acc>& S, Index q0, Index k0, const Mask& mask);

}  // namespace flashlab::cpu

// Causal masking: which (query, key) pairs may interact, and what that means for a whole tile.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <string_view>

namespace flashlab::cpu {

// With N_q == N_k there is one causal mask; with N_q != N_k the alignment must be named.
//   top_left:     query i sees keys j <= i                  (torch's is_causal)
//   bottom_right: query i sees keys j <= i + (N_k - N_q)    (flash-attn's; the last query
//                 sees every key, which is what decoding against a KV cache needs)
enum class Causal { none, top_left, bottom_right };

std::string_view to_string(Causal causal);

// Throws InvalidArgument for a value that is none of the three (a cast from a bad integer),
// which would otherwise be read as one of them.
void check_causal(Causal causal);

// What a tile of scores looks like under the mask.
//   full:    every pair is allowed, no masking work at all
//   partial: the tile crosses the diagonal; masked scores are set to -inf in place
//   skipped: every pair lies in the future; the tile is never computed
enum class TileKind { full, partial, skipped };

std::string_view to_string(TileKind kind);

struct Mask {
  Causal causal = Causal::none;
  Index n_q = 0;
  Index n_k = 0;

  // Query i may see key j exactly when j <= i + diagonal_offset().
  Index diagonal_offset() const { return causal == Causal::bottom_right ? n_k - n_q : 0; }

  bool allowed(Index i, Index j) const {
    return causal == Causal::none || j <= i + diagonal_offset();
  }

  // The tile of rows [q0, q0 + rows) and columns [k0, k0 + cols).
  TileKind classify(Index q0, Index rows, Index k0, Index cols) const;

  // Sets the masked scores of a partial tile to -inf, so their weight exp(-inf) is 0.
  template <class T>
  void apply(Matrix<T>& S, Index q0, Index k0) const;
};

}  // namespace flashlab::cpu

#include "flashlab/cpu/mask.hpp"

#include <algorithm>
#include <limits>
#include <string>

namespace flashlab::cpu {

std::string_view to_string(Causal causal) {
  switch (causal) {
    case Causal::none: return "none";
    case Causal::top_left: return "top-left";
    case Causal::bottom_right: return "bottom-right";
  }
  return "?";
}

void check_causal(Causal causal) {
  if (causal == Causal::none || causal == Causal::top_left || causal == Causal::bottom_right)
    return;
  throw InvalidArgument("causal = " + std::to_string(static_cast<int>(causal)) +
                        " is not a causal alignment: use Causal::none (0), Causal::top_left "
                        "(1) or Causal::bottom_right (2)");
}

std::string_view to_string(TileKind kind) {
  switch (kind) {
    case TileKind::full: return "full";
    case TileKind::partial: return "partial";
    case TileKind::skipped: return "skipped";
  }
  return "?";
}

TileKind Mask::classify(Index q0, Index rows, Index k0, Index cols) const {
  if (causal == Causal::none) return TileKind::full;
  const Index last_q = q0 + rows - 1, last_k = k0 + cols - 1;
  // The first query row sees the most recent key it can; if even the last query row of the
  // tile cannot see the tile's first key, the whole tile is in the future.
  if (!allowed(last_q, k0)) return TileKind::skipped;
  // If the first query row already sees the tile's last key, every pair is allowed.
  if (allowed(q0, last_k)) return TileKind::full;
  return TileKind::partial;
}

template <class T>
void Mask::apply(Matrix<T>& S, Index q0, Index k0) const {
  if (causal == Causal::none) return;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (Index r = 0; r < S.rows(); ++r) {
    // Keys j > q0 + r + offset are in row r's future; in tile columns that is c > limit.
    const Index first_masked = q0 + r + diagonal_offset() + 1 - k0;
    for (Index c = std::max<Index>(first_masked, 0); c < S.cols(); ++c) S(r, c) = minus_inf;
  }
}

template void Mask::apply(Matrix<double>&, Index, Index) const;
template void Mask::apply(Matrix<float>&, Index, Index) const;

}  // namespace flashlab::cpu

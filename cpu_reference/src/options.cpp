#include "flashlab/cpu/options.hpp"

#include "flashlab/cpu/checked.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

namespace flashlab::cpu {

double AttentionOptions::scale_for(Index d) const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(d));
}

Index tile_count(Index n, Index block) {
  if (n < 0 || block < 1) {
    std::ostringstream why;
    why << "tile_count(" << n << ", " << block << "): " << n
        << " rows cannot be cut into tiles of " << block
        << " rows; the rows must be at least 0 and the tile at least 1";
    throw InvalidArgument(why.str());
  }
  return n / block + (n % block != 0 ? 1 : 0);
}

void check_shapes(Index q_rows, Index q_cols, Index k_rows, Index k_cols, Index v_rows,
                  Index v_cols, const AttentionOptions& options) {
  std::ostringstream why;
  for (const auto& [name, extent] : {std::pair{"Q's rows N_q", q_rows}, {"Q's columns d", q_cols},
                                     {"K's rows N_k", k_rows}, {"K's columns d", k_cols},
                                     {"V's rows", v_rows}, {"V's columns d", v_cols}})
    check_nonnegative(extent, name);
  check_causal(options.causal);
  if (q_cols == 0) {
    why << "d = 0: Q has no columns; the head dimension d must be at least 1";
  } else if (k_cols != q_cols) {
    why << "K has d = " << k_cols << " columns but Q has d = " << q_cols
        << ": Q and K must share the head dimension, since S = Q K^T";
  } else if (v_cols != q_cols) {
    why << "V has " << v_cols << " columns but Q and K have d = " << q_cols
        << ": flashlab uses one head dimension d for Q, K and V";
  } else if (v_rows != k_rows) {
    why << "K has N_k = " << k_rows << " rows but V has " << v_rows
        << ": every key needs exactly one value, so K and V must have the same rows";
  } else if (options.tiles.Br < 1 || options.tiles.Bc < 1) {
    why << "tile sizes Br = " << options.tiles.Br << ", Bc = " << options.tiles.Bc
        << ": both must be at least 1 (they need not divide N)";
  } else if (options.scale && !(std::isfinite(*options.scale) && *options.scale > 0)) {
    why << "softmax scale " << *options.scale
        << " is not a positive finite number; leave it unset for 1/sqrt(d)";
  }
  if (!why.str().empty()) throw InvalidArgument(why.str());
}

template <class Acc>
void check_scores_finite(const Matrix<Acc>& S, Index q0, Index k0, const Mask& mask) {
  for (Index r = 0; r < S.rows(); ++r)
    for (Index c = 0; c < S.cols(); ++c)
      if (!std::isfinite(S(r, c)) && mask.allowed(q0 + r, k0 + c)) {
        std::ostringstream why;
        why << "score S[" << q0 + r << ", " << k0 + c << "] = " << S(r, c)
            << " is not finite: Q or K holds inf or NaN, or the scale is too large for "
               "the accumulator; every score must be a finite number";
        throw NonFiniteScore(why.str());
      }
}

template void check_scores_finite(const Matrix<double>&, Index, Index, const Mask&);
template void check_scores_finite(const Matrix<float>&, Index, Index, const Mask&);

}  // namespace flashlab::cpu

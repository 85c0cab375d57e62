// What the backward tests share: a problem of random fp64 inputs, and the two references
// that analytic gradients are held against (the naive backward, central differences).
#pragma once

#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/forward.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

namespace flashlab::test {

using cpu::Index;
using cpu::Matrix;

// The fp64 reference and the tiled backward agree to this: both sum at most a few
// hundred terms of size ~1 in different orders, which costs a few digits of 16.
inline constexpr double kGradientTolerance = 1e-10;
// Central differences are held to this, relative to the largest entry of the gradient
// (never below 1: a gradient that is exactly 0, as dQ with a single key, is then held to
// 1e-6 absolute). With step kStep the truncation error is ~kStep^2 = 1e-10, and the
// rounding error ~1e-16 * sqrt(N_q d) / kStep, below 1e-9 here: both far below it.
inline constexpr double kFiniteDifferenceTolerance = 1e-6;
inline constexpr double kStep = 1e-5;
// Tensors with more entries than this are checked on a random sample of this many entries.
inline constexpr Index kSampledEntries = 24;

struct Problem {
  Matrix<double> Q, K, V, dO;  // (N_q, d), (N_k, d), (N_k, d), (N_q, d)
};

inline Problem random_problem(Index n_q, Index n_k, Index d, std::mt19937_64& rng) {
  return {random_matrix<double>(n_q, d, rng), random_matrix<double>(n_k, d, rng),
          random_matrix<double>(n_k, d, rng), random_matrix<double>(n_q, d, rng)};
}

// max |a - b| over all entries, relative to max(1, max |b|).
inline double relative_error(const Matrix<double>& a, const Matrix<double>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  if (a.size() == 0) return 0;
  return (a - b).cwiseAbs().maxCoeff() / std::max(1.0, b.cwiseAbs().maxCoeff());
}

// The entries to check of a (rows, cols) tensor: all of them, or a random sample.
inline std::vector<std::pair<Index, Index>> entries_to_check(Index rows, Index cols,
                                                             std::mt19937_64& rng) {
  std::vector<std::pair<Index, Index>> out;
  if (rows * cols <= kSampledEntries) {
    for (Index r = 0; r < rows; ++r)
      for (Index c = 0; c < cols; ++c) out.emplace_back(r, c);
    return out;
  }
  std::uniform_int_distribution<Index> row(0, rows - 1), col(0, cols - 1);
  for (Index n = 0; n < kSampledEntries; ++n) out.emplace_back(row(rng), col(rng));
  return out;
}

// The forward whose gradient is checked: O as a function of (Q, K, V).
using ForwardFn =
    std::function<Matrix<double>(const Matrix<double>&, const Matrix<double>&, const Matrix<double>&)>;

// Checks the analytic gradient G of the loss sum(dO o O) with respect to X (one of Q, K, V,
// selected by which = 0, 1, 2) against central differences, entry by entry:
//   (loss(X + h e_rc) - loss(X - h e_rc)) / 2h = sum(dO o (O+ - O-)) / 2h.
// The outputs are subtracted before they are summed, so the rounding error of the loss
// itself (which sums N_q d terms) does not enter.
inline void check_finite_differences(const ForwardFn& forward, const Problem& p, int which,
                                     const Matrix<double>& G, std::mt19937_64& rng) {
  const double unit = std::max(1.0, G.cwiseAbs().maxCoeff());
  for (const auto& [r, c] : entries_to_check(G.rows(), G.cols(), rng)) {
    Matrix<double> plus[3] = {p.Q, p.K, p.V}, minus[3] = {p.Q, p.K, p.V};
    plus[which](r, c) += kStep;
    minus[which](r, c) -= kStep;
    const Matrix<double> O_diff = forward(plus[0], plus[1], plus[2]) -
                                   forward(minus[0], minus[1], minus[2]);  // (N_q, d) O+ - O-
    const double numeric = p.dO.cwiseProduct(O_diff).sum() / (2 * kStep);
    CAPTURE(which);
    CAPTURE(r);
    CAPTURE(c);
    CHECK(std::abs(numeric - G(r, c)) <= kFiniteDifferenceTolerance * unit);
  }
}

}  // namespace flashlab::test

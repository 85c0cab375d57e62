// The worked example: one query whose exponentiated scores are 1, 2, 4, 8 over values
// V = (1, 2, 3, 4). Seen whole, O = (1*1 + 2*2 + 4*3 + 8*4) / (1 + 2 + 4 + 8) = 49/15.
// Seen as two tiles of two keys, each tile keeps its own base: m_A = log 2, m_B = log 8.
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace flashlab::cpu;

namespace {
// The scores are the logarithms of the exponentials, so exp(S) gives 1, 2, 4, 8 back.
Matrix<double> scores(std::initializer_list<double> exps) {
  Matrix<double> S(1, exps.size());
  Index j = 0;
  for (double e : exps) S(0, j++) = std::log(e);
  return S;
}
Matrix<double> values(std::initializer_list<double> v) {
  Matrix<double> V(v.size(), 1);
  Index j = 0;
  for (double x : v) V(j++, 0) = x;
  return V;
}
constexpr double kExact = 49.0 / 15.0;
constexpr double kTight = 1e-15;  // a few ulps of 3.27: the example involves no cancellation
}  // namespace

TEST_CASE("49/15: each tile's own state") {
  const auto A = tile_state<double, double>(scores({1, 2}), values({1, 2}));
  const auto B = tile_state<double, double>(scores({4, 8}), values({3, 4}));
  // Left tile against its own max m_A = log 2: weights 1/2, 1; l_A = 1.5, U_A = 1/2*1 + 1*2.
  CHECK(A.m[0] == doctest::Approx(std::log(2.0)).epsilon(kTight));
  CHECK(A.l[0] == doctest::Approx(1.5).epsilon(kTight));
  CHECK(A.U(0, 0) == doctest::Approx(2.5).epsilon(kTight));
  // Right tile against m_B = log 8: weights 1/2, 1; l_B = 1.5, U_B = 1/2*3 + 1*4.
  CHECK(B.m[0] == doctest::Approx(std::log(8.0)).epsilon(kTight));
  CHECK(B.l[0] == doctest::Approx(1.5).epsilon(kTight));
  CHECK(B.U(0, 0) == doctest::Approx(5.5).epsilon(kTight));
}

TEST_CASE("49/15: merging rescales the left tile by exp(m_A - m) = 1/4") {
  const auto A = tile_state<double, double>(scores({1, 2}), values({1, 2}));
  const auto B = tile_state<double, double>(scores({4, 8}), values({3, 4}));
  const auto merged = merge(A, B);
  CHECK(std::exp(A.m[0] - merged.m[0]) == doctest::Approx(0.25).epsilon(kTight));
  // U = 2.5/4 + 5.5 = 6.125 and l = 1.5/4 + 1.5 = 1.875: the hand values.
  CHECK(merged.U(0, 0) == doctest::Approx(6.125).epsilon(kTight));
  CHECK(merged.l[0] == doctest::Approx(1.875).epsilon(kTight));
  const auto [O, L] = finalize(merged);
  CHECK(std::abs(O(0, 0) - kExact) <= kTight);
  CHECK(L[0] == doctest::Approx(std::log(15.0)).epsilon(kTight));  // log(1 + 2 + 4 + 8)
}

TEST_CASE("49/15: the FlashAttention-2 update, tile by tile, gives the same states") {
  auto state = SoftmaxState<double>::empty(1, 1);
  const Matrix<double> V_A = values({1, 2}), V_B = values({3, 4});
  const auto first = update<double, double>(state, scores({1, 2}), V_A);
  CHECK(first.alpha[0] == 0.0);  // exp(-inf - m'): the empty state contributes nothing
  CHECK(state.l[0] == doctest::Approx(1.5).epsilon(kTight));
  const auto second = update<double, double>(state, scores({4, 8}), V_B);
  CHECK(second.alpha[0] == doctest::Approx(0.25).epsilon(kTight));
  CHECK(state.U(0, 0) == doctest::Approx(6.125).epsilon(kTight));
  CHECK(state.l[0] == doctest::Approx(1.875).epsilon(kTight));
  CHECK(std::abs(finalize(state).O(0, 0) - kExact) <= kTight);
}

TEST_CASE("49/15: averaging the two tiles' outputs is wrong") {
  // Each tile normalised alone gives 2.5/1.5 and 5.5/1.5. Their mean ignores that the
  // right tile holds 12/15 of the denominator; the merge weighs them correctly.
  const auto A = tile_state<double, double>(scores({1, 2}), values({1, 2}));
  const auto B = tile_state<double, double>(scores({4, 8}), values({3, 4}));
  const double O_A = finalize(A).O(0, 0), O_B = finalize(B).O(0, 0);
  CHECK(O_A == doctest::Approx(2.5 / 1.5).epsilon(kTight));
  CHECK(O_B == doctest::Approx(5.5 / 1.5).epsilon(kTight));
  CHECK(std::abs(0.5 * (O_A + O_B) - kExact) > 0.5);
  // The right weights are each tile's share of the whole denominator: 3/15 and 12/15.
  CHECK(std::abs((3.0 * O_A + 12.0 * O_B) / 15.0 - kExact) <= kTight);
}

TEST_CASE("49/15: the full tiled forward reproduces the example") {
  // One query q = 1 and keys k_j = log(e_j) with d = 1 and scale 1 give S = (log 1, ..., log 8).
  Matrix<double> Q(1, 1), K(4, 1);
  Q << 1.0;
  K << std::log(1.0), std::log(2.0), std::log(4.0), std::log(8.0);
  const Matrix<double> V = values({1, 2, 3, 4});
  AttentionOptions options;
  options.scale = 1.0;
  options.tiles = {1, 2};
  const auto fa2 = forward_q_outer(Q, K, V, options);
  const auto fa1 = forward_kv_outer(Q, K, V, options);
  CHECK(std::abs(fa2.O(0, 0) - kExact) <= kTight);
  CHECK(std::abs(fa1.O(0, 0) - kExact) <= kTight);
  CHECK(fa2.tiles.computed == 2);
}

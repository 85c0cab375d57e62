// The merge of two states: order does not matter (beyond rounding), the empty state is
// its identity, and splitting a row's keys at any boundary gives the same output.
#include "flashlab/cpu/softmax_state.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <numeric>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {
constexpr Index kRows = 5, kD = 7;

double max_diff(const SoftmaxState<double>& a, const SoftmaxState<double>& b) {
  const auto oa = finalize(a), ob = finalize(b);
  return std::max((oa.O - ob.O).cwiseAbs().maxCoeff(), (oa.L - ob.L).cwiseAbs().maxCoeff());
}
// The same in units of the last place of the larger of each pair (a double's epsilon times its
// magnitude, at least 1): L = m + log l reaches about 10 here, where one ulp is 1.8e-15.
double max_ulps(const SoftmaxState<double>& a, const SoftmaxState<double>& b) {
  const auto oa = finalize(a), ob = finalize(b);
  const auto ulps = [](const auto& x, const auto& y) {
    const auto scale = x.cwiseAbs().cwiseMax(y.cwiseAbs()).cwiseMax(1.0);
    return ((x - y).cwiseAbs().array() / scale.array()).maxCoeff() /
           std::numeric_limits<double>::epsilon();
  };
  return std::max(ulps(oa.O, ob.O), ulps(oa.L, ob.L));
}

// The state of key columns [k0, k0 + n) of S against the matching rows of V.
SoftmaxState<double> state_of(const Matrix<double>& S, const Matrix<double>& V, Index k0,
                              Index n) {
  return tile_state<double, double>(S.middleCols(k0, n), V.middleRows(k0, n));
}
}  // namespace

TEST_CASE("merge is commutative and associative within rounding") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> S = random_matrix<double>(kRows, 30, rng, 4.0);
  const Matrix<double> V = random_matrix<double>(30, kD, rng);
  const auto a = state_of(S, V, 0, 10), b = state_of(S, V, 10, 7), c = state_of(S, V, 17, 13);

  // a then b vs b then a: the same products, but a fused multiply-add rounds whichever
  // comes first only once, so the two orders may differ in the last bit.
  const auto ab = merge(a, b), ba = merge(b, a);
  CHECK(ab.m == ba.m);
  CHECK(max_ulps(ab, ba) <= 2.0);

  // (a b) c vs a (b c): the rescaling factors round differently, so equal within a few ulps.
  CHECK(max_ulps(merge(ab, c), merge(a, merge(b, c))) <= 16.0);
  CHECK(max_ulps(merge(ab, c), state_of(S, V, 0, 30)) <= 16.0);
}

TEST_CASE("the empty state is the identity of merge") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> S = random_matrix<double>(kRows, 9, rng);
  const Matrix<double> V = random_matrix<double>(9, kD, rng);
  const auto a = state_of(S, V, 0, 9);
  const auto e = SoftmaxState<double>::empty(kRows, kD);
  CHECK(merge(a, e).U == a.U);
  CHECK(merge(e, a).l == a.l);
  const auto ee = merge(e, e);
  CHECK(ee.l.isZero());
  CHECK(finalize(ee).L[0] == -std::numeric_limits<double>::infinity());
}

TEST_CASE("splitting a row at every boundary, in any merge order, gives the same output") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index n = 41;
  const Matrix<double> S = random_matrix<double>(kRows, n, rng, 5.0);
  const Matrix<double> V = random_matrix<double>(n, kD, rng);
  const auto whole = state_of(S, V, 0, n);

  // Two pieces, cut at every boundary.
  for (Index cut = 1; cut < n; ++cut)
    CHECK(max_diff(merge(state_of(S, V, 0, cut), state_of(S, V, cut, n - cut)), whole) < 1e-14);

  // One key per piece, merged in a shuffled order.
  std::vector<Index> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  auto acc = SoftmaxState<double>::empty(kRows, kD);
  for (Index j : order) acc = merge(acc, state_of(S, V, j, 1));
  CHECK(max_diff(acc, whole) < 1e-13);
}

TEST_CASE("update skips a row whose tile is wholly masked, and keeps the others") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  Matrix<double> S = random_matrix<double>(2, 4, rng);
  const Matrix<double> V = random_matrix<double>(4, kD, rng);
  S.row(1).setConstant(-std::numeric_limits<double>::infinity());
  auto state = SoftmaxState<double>::empty(2, kD);
  const auto step = update<double, double>(state, S, V);
  CHECK(step.rows_skipped == 1);
  CHECK(state.m[1] == -std::numeric_limits<double>::infinity());  // untouched, not NaN
  CHECK(state.l[1] == 0.0);
  CHECK(state.U.row(1).isZero());
  CHECK(state.l[0] > 0.0);
}

TEST_CASE("merge_into_normalised: stored O = U / l with l and m, merged with a tile, stays normalised") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> S = random_matrix<double>(kRows, 20, rng, 3.0);
  const Matrix<double> V = random_matrix<double>(20, kD, rng);
  const auto a = state_of(S, V, 0, 12), b = state_of(S, V, 12, 8);
  // What FlashAttention-1 keeps in HBM after the first tile: O normalised, l and m beside it.
  Matrix<double> O = finalize(a).O;
  Vector<double> l = a.l, m = a.m;
  const auto merged = merge_into_normalised<double>(O, l, m, b);
  CHECK((O - finalize(state_of(S, V, 0, 20)).O).cwiseAbs().maxCoeff() < 1e-14);
  CHECK(l == merged.l);
  CHECK(m == merged.m);
  // An empty stored row (nothing seen yet) takes the tile's state as it is.
  Matrix<double> O0 = Matrix<double>::Zero(kRows, kD);
  Vector<double> l0 = Vector<double>::Zero(kRows),
                 m0 = Vector<double>::Constant(kRows, -std::numeric_limits<double>::infinity());
  merge_into_normalised<double>(O0, l0, m0, b);
  CHECK((O0 - finalize(b).O).cwiseAbs().maxCoeff() < 1e-15);
}

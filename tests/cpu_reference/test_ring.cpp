// Ring attention with P simulated ranks: exact against single-device attention for every P,
// awkward sizes, both causal alignments, both layouts and GQA; the (rank, step) work equals
// the count-only schedule, zigzag balances causal work as the closed form says, and bad
// rings are refused with a clear message.
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/ring.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {
// A ring changes only the order in which fp64 sums are formed (P partial states merged
// instead of one sweep) and adds one exp/log round trip per step through (O, L): a few
// hundred ulps of values of size ~1 at most, far below this bound and far above 1e-16.
constexpr double kFp64Tolerance = 1e-12;
constexpr RingLayout kLayouts[] = {RingLayout::contiguous, RingLayout::zigzag};
constexpr Causal kCausal[] = {Causal::none, Causal::top_left, Causal::bottom_right};

void check_same(const RingResult<double>& ring, const NaiveResult<double>& ref) {
  REQUIRE(ring.O.rows() == ref.O.rows());
  CHECK((ring.O - ref.O).cwiseAbs().maxCoeff() <= kFp64Tolerance);
  for (Index r = 0; r < ref.L.size(); ++r) {
    if (std::isinf(ref.L[r]))
      CHECK(ring.L[r] == ref.L[r]);  // no valid key: -inf exactly
    else
      CHECK(std::abs(ring.L[r] - ref.L[r]) <= kFp64Tolerance);
  }
}

Index max_work(const RingWork& w) {
  Index most = 0;
  for (Index r = 0; r < w.ranks; ++r) most = std::max(most, w.computed(r));
  return most;
}
Index min_work(const RingWork& w) {
  Index least = std::numeric_limits<Index>::max();
  for (Index r = 0; r < w.ranks; ++r) least = std::min(least, w.computed(r));
  return least;
}
}  // namespace

TEST_CASE("ring attention equals single-device attention for every P, size, mask and layout") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const std::pair<Index, Index> sizes[] = {
      {17, 17}, {97, 97}, {113, 203}, {203, 113}, {1023, 1023}};
  for (const auto& [n_q, n_k] : sizes) {
    const Index d = 24;
    const Matrix<double> Q = random_matrix<double>(n_q, d, rng),
                         K = random_matrix<double>(n_k, d, rng),
                         V = random_matrix<double>(n_k, d, rng);
    for (Causal causal : kCausal) {
      AttentionOptions options;
      options.causal = causal;
      options.tiles = {16, 12};  // divides neither the sizes nor the slices
      const auto ref = naive_attention<double>(Q, K, V, options);
      for (Index P : {1, 2, 3, 4, 8}) {
        for (RingLayout layout : kLayouts) {
          CAPTURE(n_q);
          CAPTURE(n_k);
          CAPTURE(P);
          CAPTURE(to_string(causal));
          CAPTURE(to_string(layout));
          const auto ring = ring_attention<double>(Q, K, V, {P, layout}, options);
          check_same(ring, ref);
          // The numerics computed exactly the tiles the count-only schedule says.
          const RingWork counted = ring_work(n_q, n_k, P, layout, options);
          for (Index r = 0; r < P; ++r)
            for (Index s = 0; s < P; ++s) {
              CHECK(ring.work.at(r, s).computed == counted.at(r, s).computed);
              CHECK(ring.work.at(r, s).skipped == counted.at(r, s).skipped);
            }
        }
      }
    }
  }
}

TEST_CASE("ring attention with one query and one key, and with P = N") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (Index n : {1, 5}) {
    const Matrix<double> Q = random_matrix<double>(n, 7, rng), K = random_matrix<double>(n, 7, rng),
                         V = random_matrix<double>(n, 7, rng);
    for (Causal causal : kCausal) {
      AttentionOptions options;
      options.causal = causal;
      for (RingLayout layout : kLayouts) {
        CAPTURE(n);
        CAPTURE(to_string(layout));
        // P = N: in the zigzag layout some ranks hold an empty chunk, one a whole row.
        check_same(ring_attention<double>(Q, K, V, {n, layout}, options),
                   naive_attention<double>(Q, K, V, options));
      }
    }
  }
}

TEST_CASE("ring attention over heads with GQA equals the multi-head forward") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index batch = 2, heads_q = 6, heads_kv = 2, n = 97, d = 16;
  HeadTensor<double> Q(batch, heads_q, n, d), K(batch, heads_kv, n, d), V(batch, heads_kv, n, d);
  std::normal_distribution<double> normal;
  for (auto* X : {&Q, &K, &V})
    for (double& x : X->data) x = normal(rng);
  for (Causal causal : {Causal::none, Causal::top_left}) {
    AttentionOptions options;
    options.causal = causal;
    const auto ref = forward_multihead<double>(Q, K, V, options);
    for (RingLayout layout : kLayouts) {
      CAPTURE(to_string(layout));
      const auto ring = ring_attention_multihead<double>(Q, K, V, {3, layout}, options);
      double error = 0;
      for (size_t i = 0; i < ref.O.data.size(); ++i)
        error = std::max(error, std::abs(ring.O.data[i] - ref.O.data[i]));
      CHECK(error <= kFp64Tolerance);
      // The work adds up over (batch, head): each runs the same ring.
      const RingWork one_head = ring_work(n, n, 3, layout, options);
      for (Index r = 0; r < 3; ++r)
        CHECK(ring.work.computed(r) == batch * heads_q * one_head.computed(r));
    }
  }
}

TEST_CASE("bf16 ring attention is within 2x of naive bf16 attention (ANCHORS.md)") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  constexpr double kRule = 2.0;  // forward error <= 2x the naive low-precision error
  const Index n = 203, d = 64;
  const Matrix<bf16> Q = random_matrix<bf16>(n, d, rng), K = random_matrix<bf16>(n, d, rng),
                     V = random_matrix<bf16>(n, d, rng);
  for (Causal causal : {Causal::none, Causal::top_left}) {
    AttentionOptions options;
    options.causal = causal;
    const Matrix<double> O_ref =
        naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>(), options).O;
    const double naive_error =
        (naive_attention(Q, K, V, options).O.cast<double>() - O_ref).cwiseAbs().maxCoeff();
    for (RingLayout layout : kLayouts) {
      const auto ring = ring_attention<bf16>(Q, K, V, {4, layout}, options);
      const double error = (round_to<bf16>(ring.O).cast<double>() - O_ref).cwiseAbs().maxCoeff();
      CAPTURE(to_string(layout));
      CAPTURE(error);
      CAPTURE(naive_error);
      CHECK(error <= kRule * naive_error);
    }
  }
}

TEST_CASE("causal work per rank: zigzag is balanced, contiguous grows with the rank") {
  // Chunks of whole tiles: B = Br = Bc divides every chunk, so the closed forms are exact.
  for (Index P : {1, 2, 3, 4, 8}) {
    const Index B = 8, t = 3;                  // zigzag chunks of t tiles
    const Index n = 2 * P * t * B, T = 2 * t;  // contiguous slices of T = 2t tiles
    AttentionOptions options;
    options.causal = Causal::top_left;
    options.tiles = {B, B};
    CAPTURE(P);
    const RingWork zigzag = ring_work(n, n, P, RingLayout::zigzag, options);
    const RingWork contiguous = ring_work(n, n, P, RingLayout::contiguous, options);
    for (Index r = 0; r < P; ++r) {
      CHECK(zigzag.computed(r) == (2 * P - 1) * t * t + t * (t + 1));
      CHECK(contiguous.computed(r) == r * T * T + T * (T + 1) / 2);
    }
    // max/min: 1 for zigzag; (P - 1) T^2 / (T (T + 1) / 2) + 1 for contiguous.
    CHECK(max_work(zigzag) == min_work(zigzag));
    const double ratio = static_cast<double>(max_work(contiguous)) / min_work(contiguous);
    CHECK(ratio == doctest::Approx(2.0 * (P - 1) * T / (T + 1) + 1.0));
    // Both layouts compute the single device's tiles when chunks are whole tiles.
    Index zz = 0, cont = 0;
    for (Index r = 0; r < P; ++r) zz += zigzag.computed(r), cont += contiguous.computed(r);
    const Index single = (n / B) * (n / B + 1) / 2;
    CHECK(zz == single);
    CHECK(cont == single);
  }
}

TEST_CASE("the ring passes each K/V slice once around") {
  for (Index P : {1, 2, 5}) {
    for (Index r = 0; r < P; ++r) {
      CHECK(kv_source(r, 0, P) == r);  // step 0: its own slice
      for (Index s = 1; s < P; ++s)    // what r holds at s, r - 1 held at s - 1
        CHECK(kv_source(r, s, P) == kv_source((r + P - 1) % P, s - 1, P));
    }
    for (Index s = 0; s < P; ++s) {  // at every step, each slice is on exactly one rank
      std::vector<int> seen(static_cast<size_t>(P), 0);
      for (Index r = 0; r < P; ++r) ++seen[static_cast<size_t>(kv_source(r, s, P))];
      CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
  }
}

TEST_CASE("state_of: (O, L) is the state with base L and sum 1, and -inf rows are empty") {
  Matrix<double> O(2, 2);
  O << 0.5, 2.0, 0.0, 0.0;
  Vector<double> L(2);
  L << 1.25, -std::numeric_limits<double>::infinity();
  const auto state = state_of(O, L);
  CHECK(state.m[0] == 1.25);
  CHECK(state.l[0] == 1.0);
  CHECK(state.U(0, 1) == 2.0);
  CHECK(state.l[1] == 0.0);
  CHECK(std::isinf(state.m[1]));
  const auto back = finalize(state);
  CHECK(back.O(0, 0) == 0.5);
  CHECK(back.L[0] == 1.25);
  CHECK(std::isinf(back.L[1]));
}

TEST_CASE("bad rings are refused with a message saying what would be right") {
  const Matrix<double> Q = Matrix<double>::Ones(5, 4), K = Matrix<double>::Ones(9, 4);
  const auto message = [&](Index P, RingLayout layout) {
    try {
      ring_attention<double>(Q, K, K, {P, layout});
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (Index P : {0, -3, 6}) {
    CAPTURE(P);
    const std::string why = message(P, RingLayout::zigzag);
    CHECK(why.find("P = " + std::to_string(P)) != std::string::npos);
    CHECK(why.find("between 1 and min(N_q, N_k) = 5") != std::string::npos);
  }
  CHECK(message(5, RingLayout::contiguous) == "no error");
  CHECK(message(2, static_cast<RingLayout>(7)).find("use RingLayout::contiguous") !=
        std::string::npos);
  CHECK_THROWS_AS(ring_attention<double>(Q, Matrix<double>::Ones(9, 3), K, {2}), InvalidArgument);
  CHECK_THROWS_AS(ring_work(5, 9, 9, RingLayout::contiguous, {}), InvalidArgument);
  CHECK_THROWS_AS(rank_slice(3, 3, 10, RingLayout::zigzag), InvalidArgument);
}

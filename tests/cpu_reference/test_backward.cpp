// The tiled backward, in both loop orders, equals the naive backward that materialises P,
// over awkward shapes, causal both ways; rows with no valid key contribute nothing.
#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "test_backward_support.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>

using namespace flashlab::cpu;
using namespace flashlab::test;

namespace {

struct Case {
  Index n_q, n_k, d;
  Causal causal;
};

constexpr Index kTileChoices[][2] = {{1, 1}, {16, 16}, {7, 13}, {32, 64}, {128, 128}, {5, 40}};

AttentionOptions options_for(Causal causal, std::mt19937_64& rng) {
  const auto& t = kTileChoices[rng() % std::size(kTileChoices)];
  AttentionOptions options;
  options.causal = causal;
  options.tiles = {t[0], t[1]};
  return options;
}

void check_against_naive(const Case& c, std::mt19937_64& rng) {
  const AttentionOptions options = options_for(c.causal, rng);
  CAPTURE(c.n_q);
  CAPTURE(c.n_k);
  CAPTURE(c.d);
  CAPTURE(to_string(c.causal));
  CAPTURE(options.tiles.Br);
  CAPTURE(options.tiles.Bc);
  const Problem p = random_problem(c.n_q, c.n_k, c.d, rng);
  const auto forward = forward_q_outer(p.Q, p.K, p.V, options);
  const auto naive = naive_backward(p.Q, p.K, p.V, p.dO, options);
  for (const auto& g : {backward_kv_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options),
                        backward_q_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options)}) {
    CHECK(relative_error(g.dQ, naive.dQ) <= kGradientTolerance);
    CHECK(relative_error(g.dK, naive.dK) <= kGradientTolerance);
    CHECK(relative_error(g.dV, naive.dV) <= kGradientTolerance);
    CHECK(g.dQ.allFinite());
    CHECK(g.dK.allFinite());
  }
}

}  // namespace

TEST_CASE("D = rowsum(dO o O) equals rowsum(P o dP) without forming P") {
  std::mt19937_64 rng(fresh_seed());
  for (const auto& [n_q, n_k, d] : {std::array<Index, 3>{1, 1, 1}, {97, 128, 59}, {128, 97, 64}}) {
    const Problem p = random_problem(n_q, n_k, d, rng);
    const auto forward = forward_q_outer(p.Q, p.K, p.V);
    const Vector<double> D = compute_D(p.dO, forward.O);  // O(N_q d): no P anywhere
    // The naive backward forms dP = dO V^T and P, both (N_q, N_k), and sums P o dP.
    const auto naive = naive_backward(p.Q, p.K, p.V, p.dO);
    CHECK((D - naive.D).cwiseAbs().maxCoeff() <= kGradientTolerance);
    // The tiled backward reports the D it used.
    const auto g = backward_kv_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO);
    CHECK(g.D == D);
  }
}

TEST_CASE("tiled backward equals the naive backward in fp64 in both loop orders") {
  std::mt19937_64 rng(fresh_seed());
  for (Index n : {1, 3, 97, 128})
    for (Index d : {1, 59, 64})
      for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right})
        check_against_naive({n, n, d, causal}, rng);
}

TEST_CASE("tiled backward equals the naive backward with N_q != N_k and both causal alignments") {
  std::mt19937_64 rng(fresh_seed());
  const Index shapes[][2] = {{97, 128}, {128, 97}, {1, 128}, {128, 1}, {3, 97}};
  for (const auto& s : shapes)
    for (Index d : {1, 59})
      for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right})
        check_against_naive({s[0], s[1], d, causal}, rng);
}

TEST_CASE("a query row with no valid key contributes nothing") {
  // Bottom-right alignment with N_q > N_k: query i sees keys j <= i - (N_q - N_k), so the
  // first N_q - N_k rows see none (O = 0, L = -inf).
  std::mt19937_64 rng(fresh_seed());
  const Index n_q = 40, n_k = 25, d = 8, empty_rows = n_q - n_k;
  AttentionOptions options;
  options.causal = Causal::bottom_right;
  options.tiles = {16, 8};
  const Problem p = random_problem(n_q, n_k, d, rng);
  const auto forward = forward_q_outer(p.Q, p.K, p.V, options);
  REQUIRE(std::isinf(forward.L[0]));

  // The same keys against the rows that do see something: the last N_k rows, which with
  // N_q = N_k sit on the same diagonal.
  const Matrix<double> Q_seen = p.Q.bottomRows(n_k), dO_seen = p.dO.bottomRows(n_k);
  const auto reference = naive_backward(Q_seen, p.K, p.V, dO_seen, options);
  for (const auto& g : {backward_kv_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options),
                        backward_q_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options)}) {
    CHECK(g.dQ.topRows(empty_rows).cwiseAbs().maxCoeff() == 0.0);
    CHECK(relative_error(g.dQ.bottomRows(n_k), reference.dQ) <= kGradientTolerance);
    CHECK(relative_error(g.dK, reference.dK) <= kGradientTolerance);
    CHECK(relative_error(g.dV, reference.dV) <= kGradientTolerance);
  }
}

TEST_CASE("causal backward skips the tiles above the diagonal in both loop orders") {
  std::mt19937_64 rng(fresh_seed());
  const Index n = 100, d = 4;
  AttentionOptions options;
  options.causal = Causal::top_left;
  options.tiles = {10, 10};
  const Problem p = random_problem(n, n, d, rng);
  const auto forward = forward_q_outer(p.Q, p.K, p.V, options);
  const auto kv = backward_kv_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options);
  const auto q = backward_q_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options);
  // 10 x 10 tiles: 45 lie above the diagonal, 10 on it, 45 below.
  const Index tiles_per_side = n / options.tiles.Br;
  const Index above = tiles_per_side * (tiles_per_side - 1) / 2;
  for (const auto& g : {kv, q}) {
    CHECK(g.tiles.skipped == above);
    CHECK(g.tiles.partial == tiles_per_side);
    CHECK(g.tiles.total() == tiles_per_side * tiles_per_side);
  }
  CHECK(forward.tiles.skipped == kv.tiles.skipped);
}

TEST_CASE("the backward is deterministic: repeated runs are bitwise equal") {
  std::mt19937_64 rng(fresh_seed());
  const Problem p = random_problem(97, 113, 59, rng);
  AttentionOptions options;
  options.tiles = {16, 32};
  const auto forward = forward_q_outer(p.Q, p.K, p.V, options);
  const auto first = backward_kv_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options);
  constexpr int kRuns = 5;
  for (int run = 0; run < kRuns; ++run) {
    const auto again = backward_kv_outer(p.Q, p.K, p.V, forward.O, forward.L, p.dO, options);
    CHECK(again.dQ == first.dQ);
    CHECK(again.dK == first.dK);
    CHECK(again.dV == first.dV);
  }
}

TEST_CASE("fp32 backward stays within fp32 rounding of the fp64 one") {
  std::mt19937_64 rng(fresh_seed());
  const Problem p = random_problem(97, 128, 64, rng);
  AttentionOptions options;
  options.causal = Causal::top_left;
  options.tiles = {32, 32};
  const auto f64 = forward_q_outer(p.Q, p.K, p.V, options);
  const auto g64 = backward_q_outer(p.Q, p.K, p.V, f64.O, f64.L, p.dO, options);
  const Matrix<float> Q = p.Q.cast<float>(), K = p.K.cast<float>(), V = p.V.cast<float>(),
                      dO = p.dO.cast<float>();
  const auto f32 = forward_q_outer(Q, K, V, options);
  const auto g32 = backward_kv_outer(Q, K, V, f32.O, f32.L, dO, options);
  // fp32 keeps ~7 digits; sums of ~100 terms of size ~1 lose at most two of them.
  constexpr double kFp32Tolerance = 1e-4;
  CHECK(relative_error(g32.dQ.cast<double>(), g64.dQ) <= kFp32Tolerance);
  CHECK(relative_error(g32.dK.cast<double>(), g64.dK) <= kFp32Tolerance);
  CHECK(relative_error(g32.dV.cast<double>(), g64.dV) <= kFp32Tolerance);
}

// The tiled forward pass, in both loop orders, equals naive attention in fp64 over awkward
// shapes: sizes that tiles do not divide, d = 1 and 59, N_q != N_k, causal both ways.
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <limits>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {
// fp64 holds 16 digits; the two algorithms sum in different orders over at most ~1000
// terms of magnitude ~1, which costs a few digits at most.
constexpr double kFp64Tolerance = 1e-12;

struct Case {
  Index n_q, n_k, d, Br, Bc;
  Causal causal;
};

void check_against_naive(const Case& c, std::mt19937_64& rng) {
  CAPTURE(c.n_q);
  CAPTURE(c.n_k);
  CAPTURE(c.d);
  CAPTURE(c.Br);
  CAPTURE(c.Bc);
  CAPTURE(to_string(c.causal));
  const Matrix<double> Q = random_matrix<double>(c.n_q, c.d, rng);
  const Matrix<double> K = random_matrix<double>(c.n_k, c.d, rng);
  const Matrix<double> V = random_matrix<double>(c.n_k, c.d, rng);
  AttentionOptions options;
  options.causal = c.causal;
  options.tiles = {c.Br, c.Bc};
  const auto reference = naive_attention(Q, K, V, options);
  for (const auto& tiled : {forward_q_outer(Q, K, V, options), forward_kv_outer(Q, K, V, options)}) {
    REQUIRE(tiled.O.rows() == c.n_q);
    CHECK((tiled.O - reference.O).cwiseAbs().maxCoeff() <= kFp64Tolerance);
    // L = -inf on rows with no valid key in both: compare where finite, match where not.
    for (Index r = 0; r < c.n_q; ++r) {
      if (std::isinf(reference.L[r])) CHECK(tiled.L[r] == reference.L[r]);
      else CHECK(std::abs(tiled.L[r] - reference.L[r]) <= kFp64Tolerance);
    }
  }
}
}  // namespace

TEST_CASE("tiled equals naive in fp64 over awkward shapes, both loop orders") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index sizes[] = {1, 2, 97, 113, 1023};
  const Index dims[] = {1, 59, 64, 111, 128};
  const Index tiles[][2] = {{1, 1}, {16, 16}, {7, 13}, {64, 32}, {128, 128}, {33, 100}};
  for (Index n : sizes)
    for (Index d : dims) {
      const auto& t = tiles[rng() % std::size(tiles)];
      for (Causal causal : {Causal::none, Causal::top_left})
        check_against_naive({n, n, d, t[0], t[1], causal}, rng);
    }
}

TEST_CASE("tiled equals naive with N_q != N_k, both causal alignments") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index pairs[][2] = {{113, 203}, {203, 113}, {1, 339}, {97, 1}, {1023, 1024}};
  for (const auto& p : pairs)
    for (Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right})
      check_against_naive({p[0], p[1], 59, 16, 24, causal}, rng);
}

TEST_CASE("causal tiles: future tiles are skipped and counted, diagonal tiles masked") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index n = 24, d = 4;
  const Matrix<double> Q = random_matrix<double>(n, d, rng), K = random_matrix<double>(n, d, rng),
                       V = random_matrix<double>(n, d, rng);
  AttentionOptions options;
  options.causal = Causal::top_left;
  options.tiles = {4, 4};
  // 6 x 6 tiles: 6 on the diagonal (partial), 15 below it (full), 15 above it (skipped).
  for (const auto& r : {forward_q_outer(Q, K, V, options), forward_kv_outer(Q, K, V, options)}) {
    CHECK(r.tiles.computed == 21);
    CHECK(r.tiles.partial == 6);
    CHECK(r.tiles.skipped == 15);
  }
  options.causal = Causal::none;
  CHECK(forward_q_outer(Q, K, V, options).tiles.skipped == 0);
}

TEST_CASE("a query with no valid key gets O = 0 and L = -inf, never NaN") {
  // Bottom-right alignment with N_q > N_k: query i sees keys j <= i - (N_q - N_k), so the
  // first N_q - N_k queries see no key at all.
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index n_q = 10, n_k = 4, d = 3;
  const Matrix<double> Q = random_matrix<double>(n_q, d, rng);
  const Matrix<double> K = random_matrix<double>(n_k, d, rng), V = random_matrix<double>(n_k, d, rng);
  AttentionOptions options;
  options.causal = Causal::bottom_right;
  options.tiles = {3, 2};
  for (const auto& r : {forward_q_outer(Q, K, V, options), forward_kv_outer(Q, K, V, options)}) {
    for (Index i = 0; i < n_q - n_k; ++i) {
      CHECK(r.O.row(i).isZero());
      CHECK(r.L[i] == -std::numeric_limits<double>::infinity());
    }
    CHECK(r.O.allFinite());
    CHECK(std::isfinite(r.L[n_q - 1]));
  }
}

TEST_CASE("N = 0 returns an empty result, and N_k = 0 follows the no-valid-key convention") {
  const Matrix<double> empty(0, 8), Q(3, 8);
  const auto r = forward_q_outer(empty, empty, empty);
  CHECK(r.O.rows() == 0);
  CHECK(r.L.size() == 0);
  CHECK(forward_kv_outer(empty, empty, empty).O.rows() == 0);
  CHECK(naive_attention(empty, empty, empty).O.rows() == 0);
  const auto no_keys = forward_q_outer(Matrix<double>(Matrix<double>::Ones(3, 8)), empty, empty);
  CHECK(no_keys.O.isZero());
  CHECK(no_keys.L[2] == -std::numeric_limits<double>::infinity());
}

TEST_CASE("the observer sees every tile in order, with the state after each update") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> Q = random_matrix<double>(8, 4, rng), K = random_matrix<double>(12, 4, rng),
                       V = random_matrix<double>(12, 4, rng);
  AttentionOptions options;
  options.tiles = {4, 4};
  options.causal = Causal::top_left;
  std::vector<std::pair<Index, Index>> seen;
  double last_l = 0;
  forward_q_outer<double>(Q, K, V, options, [&](const TileEvent<double>& e) {
    seen.emplace_back(e.i, e.j);
    if (e.kind != TileKind::skipped) last_l = e.state->l[0];
    else CHECK(e.state == nullptr);
  });
  const std::vector<std::pair<Index, Index>> expected = {{0, 0}, {0, 1}, {0, 2},
                                                         {1, 0}, {1, 1}, {1, 2}};
  CHECK(seen == expected);
  CHECK(last_l > 0);
}

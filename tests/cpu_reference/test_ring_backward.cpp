// Ring attention's backward with P simulated ranks: exact against the single-device backward
// (fp64) for every P, awkward sizes, every causal mode, both layouts and GQA; the tiles
// each rank computes are the forward's schedule; the rows each link carries (K/V and the
// dK/dV accumulators) equal the closed forms; bad rings and bad inputs are refused.
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "flashlab/cpu/ring_backward.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {
// The ring sums each gradient in another order than one sweep does (per step, per chunk
// pair, and dK, dV over ranks): a few hundred fp64 roundings of values of the size of the
// largest gradient at most. Relative to that size, 1e-12 is far above them and far below
// any missing or doubled tile.
constexpr double kFp64Tolerance = 1e-12;
constexpr RingLayout kLayouts[] = {RingLayout::contiguous, RingLayout::zigzag};
constexpr Causal kCausal[] = {Causal::none, Causal::top_left, Causal::bottom_right};

// max |a - b| relative to the size of b's largest entry (at least 1).
double relative_error(const Matrix<double>& a, const Matrix<double>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  if (a.size() == 0) return 0;
  return (a - b).cwiseAbs().maxCoeff() / std::max(1.0, b.cwiseAbs().maxCoeff());
}

Index rows_of_rank(Index rank, Index ranks, Index n, RingLayout layout) {
  Index rows = 0;
  for (const Chunk& c : rank_slice(rank, ranks, n, layout)) rows += c.rows;
  return rows;
}

struct Problem {
  Matrix<double> Q, K, V, dO;
};

Problem random_problem(Index n_q, Index n_k, Index d, std::mt19937_64& rng) {
  return {random_matrix<double>(n_q, d, rng), random_matrix<double>(n_k, d, rng),
          random_matrix<double>(n_k, d, rng), random_matrix<double>(n_q, d, rng)};
}
}  // namespace

TEST_CASE("the ring's backward equals the single-device backward for every P, size and mask") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const std::pair<Index, Index> sizes[] = {{17, 17},   {97, 97},     {113, 203},
                                           {203, 113}, {1023, 1023}, {1023, 331}};
  for (const auto& [n_q, n_k] : sizes) {
    const Index d = 24;
    const Problem in = random_problem(n_q, n_k, d, rng);
    for (Causal causal : kCausal) {
      AttentionOptions options;
      options.causal = causal;
      options.tiles = {16, 12};  // divides neither the sizes nor the slices
      for (Index P : {1, 2, 3, 4, 8}) {
        for (RingLayout layout : kLayouts) {
          CAPTURE(n_q);
          CAPTURE(n_k);
          CAPTURE(P);
          CAPTURE(to_string(causal));
          CAPTURE(to_string(layout));
          // O and L from the ring's own forward, as a ring training step would have them.
          const auto fwd = ring_attention<double>(in.Q, in.K, in.V, {P, layout}, options);
          const auto ring =
              ring_backward<double>(in.Q, in.K, in.V, fwd.O, fwd.L, in.dO, {P, layout}, options);
          const auto one =
              backward_kv_outer<double>(in.Q, in.K, in.V, fwd.O, fwd.L, in.dO, options);
          CHECK(relative_error(ring.dQ, one.dQ) <= kFp64Tolerance);
          CHECK(relative_error(ring.dK, one.dK) <= kFp64Tolerance);
          CHECK(relative_error(ring.dV, one.dV) <= kFp64Tolerance);
          CHECK(ring.D == one.D);  // the same rowsum of the same rows, each on its rank
          // The backward recomputes exactly the forward's tiles, rank by rank, step by step.
          for (Index r = 0; r < P; ++r)
            for (Index s = 0; s < P; ++s) {
              CHECK(ring.work.at(r, s).computed == fwd.work.at(r, s).computed);
              CHECK(ring.work.at(r, s).skipped == fwd.work.at(r, s).skipped);
            }
        }
      }
    }
  }
}

TEST_CASE("the ring's forward and backward together equal the materialised backward") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (const auto& [n_q, n_k] : {std::pair<Index, Index>{97, 97}, {113, 203}, {203, 113}}) {
    const Problem in = random_problem(n_q, n_k, 16, rng);
    for (Causal causal : kCausal) {
      AttentionOptions options;
      options.causal = causal;
      const auto naive = naive_backward<double>(in.Q, in.K, in.V, in.dO, options);
      for (RingLayout layout : kLayouts) {
        CAPTURE(to_string(causal));
        CAPTURE(to_string(layout));
        const auto fwd = ring_attention<double>(in.Q, in.K, in.V, {4, layout}, options);
        const auto ring =
            ring_backward<double>(in.Q, in.K, in.V, fwd.O, fwd.L, in.dO, {4, layout}, options);
        CHECK(relative_error(ring.dQ, naive.dQ) <= kFp64Tolerance);
        CHECK(relative_error(ring.dK, naive.dK) <= kFp64Tolerance);
        CHECK(relative_error(ring.dV, naive.dV) <= kFp64Tolerance);
      }
    }
  }
}

TEST_CASE("the ring's backward with one query and key, and with P = N (empty zigzag chunks)") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (Index n : {1, 5}) {
    const Problem in = random_problem(n, n, 7, rng);
    for (Causal causal : kCausal) {
      AttentionOptions options;
      options.causal = causal;
      for (RingLayout layout : kLayouts) {
        CAPTURE(n);
        CAPTURE(to_string(layout));
        const auto naive = naive_backward<double>(in.Q, in.K, in.V, in.dO, options);
        const auto fwd = ring_attention<double>(in.Q, in.K, in.V, {n, layout}, options);
        const auto ring =
            ring_backward<double>(in.Q, in.K, in.V, fwd.O, fwd.L, in.dO, {n, layout}, options);
        CHECK(relative_error(ring.dQ, naive.dQ) <= kFp64Tolerance);
        CHECK(relative_error(ring.dK, naive.dK) <= kFp64Tolerance);
        CHECK(relative_error(ring.dV, naive.dV) <= kFp64Tolerance);
      }
    }
  }
}

TEST_CASE("each link carries every slice but one: K/V (P - 1) times, dK/dV (P - 1) times") {
  // Link r -> r + 1 carries, after steps 0 .. P - 2, every K/V slice except rank r + 1's
  // (which ends its trip there), and after steps 1 .. P - 1 the accumulator of every slice
  // except rank r's own (whose step-0 share stays home).
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (const auto& [n_q, n_k] : {std::pair<Index, Index>{97, 97}, {113, 203}}) {
    const Problem in = random_problem(n_q, n_k, 8, rng);
    for (Index P : {1, 2, 3, 4, 8}) {
      for (RingLayout layout : kLayouts) {
        CAPTURE(P);
        CAPTURE(to_string(layout));
        const auto fwd = ring_attention<double>(in.Q, in.K, in.V, {P, layout});
        const auto ring = ring_backward<double>(in.Q, in.K, in.V, fwd.O, fwd.L, in.dO, {P, layout});
        Index kv_all = 0, gradients_all = 0;
        for (Index r = 0; r < P; ++r) {
          const Index next = (r + 1) % P;
          CHECK(ring.sends.kv_rows_sent(r) ==
                (P == 1 ? 0 : n_k - rows_of_rank(next, P, n_k, layout)));
          CHECK(ring.sends.gradient_rows_sent(r) ==
                (P == 1 ? 0 : n_k - rows_of_rank(r, P, n_k, layout)));
          kv_all += ring.sends.kv_rows_sent(r);
          gradients_all += ring.sends.gradient_rows_sent(r);
          for (Index s = 0; s < P; ++s) {  // K/V before the last step, dK/dV from step 1 on
            CHECK((ring.sends.kv_rows[size_t(r * P + s)] > 0) ==
                  (s + 1 < P && rows_of_rank((r - s + P) % P, P, n_k, layout) > 0));
            CHECK((ring.sends.gradient_rows[size_t(r * P + s)] > 0) ==
                  (s >= 1 && rows_of_rank((r - s + P) % P, P, n_k, layout) > 0));
          }
        }
        // Over all links: each slice crosses P - 1 links, with its accumulator as often.
        CHECK(kv_all == (P - 1) * n_k);
        CHECK(gradients_all == (P - 1) * n_k);
      }
    }
  }
}

TEST_CASE("the ring's backward over heads with GQA equals the multi-head backward") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index batch = 2, heads_q = 6, heads_kv = 2, d = 16;
  for (const auto& [n_q, n_k, causal] :
       {std::tuple{97, 97, Causal::top_left}, std::tuple{113, 203, Causal::bottom_right},
        std::tuple{113, 203, Causal::none}}) {
    HeadTensor<double> Q(batch, heads_q, n_q, d), K(batch, heads_kv, n_k, d),
        V(batch, heads_kv, n_k, d), dO(batch, heads_q, n_q, d);
    std::normal_distribution<double> normal;
    for (auto* X : {&Q, &K, &V, &dO})
      for (double& x : X->data) x = normal(rng);
    AttentionOptions options;
    options.causal = causal;
    const auto fwd = forward_multihead<double>(Q, K, V, options);
    const auto ref = backward_multihead<double>(Q, K, V, fwd.O, fwd.L, dO, options);
    for (RingLayout layout : kLayouts) {
      CAPTURE(n_q);
      CAPTURE(n_k);
      CAPTURE(to_string(causal));
      CAPTURE(to_string(layout));
      const auto ring =
          ring_backward_multihead<double>(Q, K, V, fwd.O, fwd.L, dO, {3, layout}, options);
      const auto error = [](const HeadTensor<double>& a, const HeadTensor<double>& b) {
        double worst = 0, size = 1;
        for (size_t i = 0; i < b.data.size(); ++i) {
          worst = std::max(worst, std::abs(a.data[i] - b.data[i]));
          size = std::max(size, std::abs(b.data[i]));
        }
        return worst / size;
      };
      CHECK(error(ring.dQ, ref.dQ) <= kFp64Tolerance);
      CHECK(error(ring.dK, ref.dK) <= kFp64Tolerance);
      CHECK(error(ring.dV, ref.dV) <= kFp64Tolerance);
      const RingWork one_head = ring_work(n_q, n_k, 3, layout, options);
      for (Index r = 0; r < 3; ++r)
        CHECK(ring.work.computed(r) == batch * heads_q * one_head.computed(r));
    }
  }
}

TEST_CASE("sends_kv and sends_gradients: P - 1 sends of each, dK/dV one step behind") {
  for (Index P : {1, 2, 3, 8}) {
    Index kv = 0, gradients = 0;
    for (Index s = 0; s < P; ++s) kv += sends_kv(s, P), gradients += sends_gradients(s, P);
    CHECK(kv == P - 1);
    CHECK(gradients == P - 1);
    CHECK_FALSE(sends_gradients(0, P));  // the owner keeps its step-0 share
    CHECK_FALSE(sends_kv(P - 1, P));     // nobody reads K and V after the last step
  }
}

TEST_CASE("bad rings and bad inputs to the ring's backward are refused, saying what is right") {
  const Matrix<double> Q = Matrix<double>::Ones(5, 4), K = Matrix<double>::Ones(9, 4);
  const Vector<double> L = Vector<double>::Zero(5);
  const auto message = [&](Index P, RingLayout layout, const Matrix<double>& O,
                           const Vector<double>& L_in) {
    try {
      ring_backward<double>(Q, K, K, O, L_in, Q, {P, layout});
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (Index P : {0, -3, 6}) {
    CAPTURE(P);
    const std::string why = message(P, RingLayout::zigzag, Q, L);
    CHECK(why.find("P = " + std::to_string(P)) != std::string::npos);
    CHECK(why.find("between 1 and min(N_q, N_k) = 5") != std::string::npos);
  }
  CHECK(message(5, RingLayout::contiguous, Q, L) == "no error");
  CHECK(message(2, static_cast<RingLayout>(7), Q, L).find("use RingLayout::contiguous") !=
        std::string::npos);
  CHECK(message(2, RingLayout::zigzag, K, L).find("pass the output that the forward returned") !=
        std::string::npos);
  CHECK(message(2, RingLayout::zigzag, Q, Vector<double>::Zero(4))
            .find("L has 4 entries but Q has N_q = 5 rows") != std::string::npos);
  CHECK(message(2, RingLayout::zigzag, Q, Vector<double>()).find("L is missing") !=
        std::string::npos);
  // Over heads: a KV head count that does not divide the query heads, and a short L.
  HeadTensor<double> Qh(1, 3, 5, 4), Kh(1, 2, 5, 4), Lh(1, 3, 4, 1);
  CHECK_THROWS_AS(
      ring_backward_multihead<double>(Qh, Kh, Kh, Qh, HeadTensor<double>(1, 3, 5, 1), Qh, {2}),
      InvalidArgument);
  HeadTensor<double> Kh1(1, 1, 5, 4);
  CHECK_THROWS_WITH_AS(ring_backward_multihead<double>(Qh, Kh1, Kh1, Qh, Lh, Qh, {2}),
                       doctest::Contains("one log-sum-exp per query row"), InvalidArgument);
}

// The multi-head backward with GQA and MQA: each query head's dQ is its own, and a shared
// KV head's dK and dV are the sums over the query heads that read it.
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "test_backward_support.hpp"

#include <doctest/doctest.h>

using namespace flashlab::cpu;
using namespace flashlab::test;

namespace {

HeadTensor<double> random_heads(Index batch, Index heads, Index rows, Index d,
                                std::mt19937_64& rng) {
  HeadTensor<double> X(batch, heads, rows, d);
  std::normal_distribution<double> normal;
  for (auto& x : X.data) x = normal(rng);
  return X;
}

void check_against_naive(Index heads_q, Index heads_kv, Causal causal, std::mt19937_64& rng) {
  CAPTURE(heads_q);
  CAPTURE(heads_kv);
  CAPTURE(to_string(causal));
  const Index batch = 2, n_q = 45, n_k = 61, d = 9;
  AttentionOptions options;
  options.causal = causal;
  options.tiles = {16, 16};
  const auto Q = random_heads(batch, heads_q, n_q, d, rng), dO = random_heads(batch, heads_q, n_q, d, rng);
  const auto K = random_heads(batch, heads_kv, n_k, d, rng), V = random_heads(batch, heads_kv, n_k, d, rng);
  const auto forward = forward_multihead(Q, K, V, options);
  const auto g = backward_multihead(Q, K, V, forward.O, forward.L, dO, options);

  for (Index b = 0; b < batch; ++b)
    for (Index h_kv = 0; h_kv < heads_kv; ++h_kv) {
      Matrix<double> dK_sum = Matrix<double>::Zero(n_k, d), dV_sum = Matrix<double>::Zero(n_k, d);
      for (Index h = 0; h < heads_q; ++h) {
        if (kv_head_for(h, heads_q, heads_kv) != h_kv) continue;
        const auto naive = naive_backward<double>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv),
                                                  dO.head(b, h), options);
        CHECK(relative_error(g.dQ.head(b, h), naive.dQ) <= kGradientTolerance);
        dK_sum += naive.dK;
        dV_sum += naive.dV;
      }
      CHECK(relative_error(g.dK.head(b, h_kv), dK_sum) <= kGradientTolerance);
      CHECK(relative_error(g.dV.head(b, h_kv), dV_sum) <= kGradientTolerance);
    }
}

}  // namespace

TEST_CASE("multi-head backward equals the naive backward head by head for MHA and GQA and MQA") {
  std::mt19937_64 rng(fresh_seed());
  for (Causal causal : {Causal::none, Causal::bottom_right}) {
    check_against_naive(3, 3, causal, rng);  // multi-head: one KV head each
    check_against_naive(6, 2, causal, rng);  // GQA: three query heads per KV head
    check_against_naive(4, 1, causal, rng);  // MQA: one KV head for all
  }
}

TEST_CASE("multi-head backward is deterministic across threads") {
  std::mt19937_64 rng(fresh_seed());
  const auto Q = random_heads(2, 8, 70, 16, rng), dO = random_heads(2, 8, 70, 16, rng);
  const auto K = random_heads(2, 2, 70, 16, rng), V = random_heads(2, 2, 70, 16, rng);
  const auto forward = forward_multihead(Q, K, V);
  const auto first = backward_multihead(Q, K, V, forward.O, forward.L, dO);
  constexpr int kRuns = 5;
  for (int run = 0; run < kRuns; ++run) {
    const auto again = backward_multihead(Q, K, V, forward.O, forward.L, dO);
    CHECK(again.dQ.data == first.dQ.data);
    CHECK(again.dK.data == first.dK.data);
    CHECK(again.dV.data == first.dV.data);
  }
}

// Batches and heads with grouped-query attention: every query head equals single-head
// attention against the KV head it shares.
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

using namespace flashlab::cpu;

namespace {
template <class T>
HeadTensor<T> random_heads(Index b, Index h, Index n, Index d, std::mt19937_64& rng) {
  HeadTensor<T> X(b, h, n, d);
  for (Index bi = 0; bi < b; ++bi)
    for (Index hi = 0; hi < h; ++hi) X.head(bi, hi) = flashlab::test::random_matrix<T>(n, d, rng);
  return X;
}
}  // namespace

TEST_CASE("multi-head, GQA and MQA equal per-head naive attention") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index batch = 2, heads_q = 6, n_q = 97, n_k = 113, d = 59;
  for (Index heads_kv : {6, 3, 2, 1}) {  // MHA, GQA, GQA, MQA
    CAPTURE(heads_kv);
    const auto Q = random_heads<double>(batch, heads_q, n_q, d, rng);
    const auto K = random_heads<double>(batch, heads_kv, n_k, d, rng);
    const auto V = random_heads<double>(batch, heads_kv, n_k, d, rng);
    AttentionOptions options;
    options.causal = Causal::bottom_right;
    options.tiles = {32, 24};
    const auto r = forward_multihead(Q, K, V, options);
    for (Index b = 0; b < batch; ++b)
      for (Index h = 0; h < heads_q; ++h) {
        const Index h_kv = h / (heads_q / heads_kv);
        const auto ref = naive_attention<double>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv),
                                                 options);
        CHECK((r.O.head(b, h) - ref.O).cwiseAbs().maxCoeff() < 1e-12);
        CHECK((r.L.head(b, h).col(0) - ref.L).cwiseAbs().maxCoeff() < 1e-12);
      }
    // 4 query tiles x 5 KV tiles per head; the counts add up over 12 heads.
    CHECK(r.tiles.total() == batch * heads_q * 4 * 5);
  }
}

TEST_CASE("kv_head_for maps consecutive query heads onto one KV head") {
  CHECK(kv_head_for(0, 8, 2) == 0);
  CHECK(kv_head_for(3, 8, 2) == 0);
  CHECK(kv_head_for(4, 8, 2) == 1);
  CHECK(kv_head_for(7, 8, 1) == 0);
  CHECK(kv_head_for(5, 8, 8) == 5);
}

TEST_CASE("multi-head dropout: each (batch, query head) replays its own mask") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index batch = 2, heads_q = 4, heads_kv = 2, n = 97, d = 16;
  const auto Q = random_heads<double>(batch, heads_q, n, d, rng);
  const auto K = random_heads<double>(batch, heads_kv, n, d, rng);
  const auto V = random_heads<double>(batch, heads_kv, n, d, rng);
  AttentionOptions options;
  options.tiles = {32, 16};
  const Dropout dropout{0.2, rng(), 7};
  const auto r = forward_multihead(Q, K, V, options, dropout);
  for (Index b = 0; b < batch; ++b)
    for (Index h = 0; h < heads_q; ++h) {
      const DropoutMask mask(dropout, b, h);
      const Matrix<double> q = Q.head(b, h), k = K.head(b, h / 2), v = V.head(b, h / 2);
      const auto single = forward_q_outer(q, k, v, options, {}, &mask);
      CHECK((r.O.head(b, h) - single.O).cwiseAbs().maxCoeff() < 1e-12);
    }
  // A dropout probability outside [0, 1) is refused before any work.
  CHECK_THROWS_AS(forward_multihead(Q, K, V, options, Dropout{1.0, 1, 0}), InvalidArgument);
}

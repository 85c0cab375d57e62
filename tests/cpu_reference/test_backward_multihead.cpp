// The multi-head backward with GQA and MQA: each query head's dQ is its own, and a shared
// KV head's dK and dV are the sums over the query heads that read it.
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "test_backward_support.hpp"

#include <doctest/doctest.h>
#include <omp.h>

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
  const auto Q = random_heads(batch, heads_q, n_q, d, rng),
             dO = random_heads(batch, heads_q, n_q, d, rng);
  const auto K = random_heads(batch, heads_kv, n_k, d, rng),
             V = random_heads(batch, heads_kv, n_k, d, rng);
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

namespace {

// The order the multi-head backward keeps, written out serially: backward_kv_outer on each
// query head, and each KV head's dK and dV summed over its group's query heads in order,
// from zero. The parallel backward must equal it bit for bit.
struct SerialGradients {
  std::vector<Matrix<double>> dQ, dK, dV;  // per (b, h) and per (b, h_kv)
};

SerialGradients serial_backward(const HeadTensor<double>& Q, const HeadTensor<double>& K,
                                const HeadTensor<double>& V, const HeadTensor<double>& O,
                                const HeadTensor<double>& L, const HeadTensor<double>& dO,
                                const AttentionOptions& options,
                                const std::optional<Dropout>& dropout) {
  SerialGradients out;
  const Index group = Q.heads / K.heads;
  for (Index b = 0; b < Q.batch; ++b)
    for (Index h_kv = 0; h_kv < K.heads; ++h_kv) {
      Matrix<double> dK = Matrix<double>::Zero(K.rows, K.cols), dV = dK;
      for (Index h = h_kv * group; h < (h_kv + 1) * group; ++h) {
        const std::optional<DropoutMask> mask =
            dropout ? std::optional<DropoutMask>(DropoutMask(*dropout, b, h)) : std::nullopt;
        const Vector<double> L_h = L.head(b, h).col(0);
        const auto g =
            backward_kv_outer<double>(Q.head(b, h), K.head(b, h_kv), V.head(b, h_kv), O.head(b, h),
                                      L_h, dO.head(b, h), options, mask ? &*mask : nullptr);
        out.dQ.push_back(g.dQ);
        dK += g.dK;
        dV += g.dV;
      }
      out.dK.push_back(dK);
      out.dV.push_back(dV);
    }
  return out;
}

void check_bitwise_serial(Index batch, Index heads_q, Index heads_kv, Index n_q, Index n_k, Index d,
                          Causal causal, TileSizes tiles, bool with_dropout, std::mt19937_64& rng) {
  CAPTURE(heads_q);
  CAPTURE(heads_kv);
  CAPTURE(n_q);
  CAPTURE(n_k);
  CAPTURE(to_string(causal));
  CAPTURE(with_dropout);
  AttentionOptions options;
  options.causal = causal;
  options.tiles = tiles;
  const std::optional<Dropout> dropout =
      with_dropout ? std::optional<Dropout>(Dropout{.p = 0.2, .seed = rng(), .offset = 0})
                   : std::nullopt;
  const auto Q = random_heads(batch, heads_q, n_q, d, rng);
  const auto dO = random_heads(batch, heads_q, n_q, d, rng);
  const auto K = random_heads(batch, heads_kv, n_k, d, rng);
  const auto V = random_heads(batch, heads_kv, n_k, d, rng);
  const auto forward = forward_multihead(Q, K, V, options, dropout);
  const auto g = backward_multihead(Q, K, V, forward.O, forward.L, dO, options, dropout);
  const auto serial = serial_backward(Q, K, V, forward.O, forward.L, dO, options, dropout);
  std::size_t q = 0, kv = 0;
  for (Index b = 0; b < batch; ++b) {
    for (Index h = 0; h < heads_q; ++h) CHECK(g.dQ.head(b, h) == serial.dQ[q++]);
    for (Index h_kv = 0; h_kv < heads_kv; ++h_kv, ++kv) {
      CHECK(g.dK.head(b, h_kv) == serial.dK[kv]);
      CHECK(g.dV.head(b, h_kv) == serial.dV[kv]);
    }
  }
}

}  // namespace

TEST_CASE("multi-head backward is bitwise the serial order, spread by KV head or by KV tile") {
  std::mt19937_64 rng(fresh_seed());
  const int saved = omp_get_max_threads();
  // 1 thread: a (batch, KV head) pair per item; 64: fewer pairs than threads everywhere
  // below, so every shape takes the (batch, query head, KV tile) spread and its ordered dQ.
  for (const int threads : {1, 2, 64}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    for (const Causal causal : {Causal::none, Causal::top_left, Causal::bottom_right})
      for (const bool with_dropout : {false, true}) {
        check_bitwise_serial(2, 6, 2, 97, 113, 17, causal, {16, 32}, with_dropout, rng);  // GQA
        check_bitwise_serial(1, 4, 1, 113, 97, 8, causal, {32, 16}, with_dropout, rng);   // MQA
        check_bitwise_serial(2, 3, 3, 1, 17, 5, causal, {16, 16}, with_dropout, rng);     // N_q = 1
        check_bitwise_serial(1, 2, 2, 17, 1, 5, causal, {16, 16}, with_dropout, rng);     // N_k = 1
      }
  }
  omp_set_num_threads(saved);
}

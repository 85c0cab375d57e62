// Analytic gradients equal central finite differences of the forward pass, so the
// backward differentiates the function the forward computes, not merely what the naive
// backward computes.
#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "test_backward_support.hpp"

#include <doctest/doctest.h>

using namespace flashlab::cpu;
using namespace flashlab::test;

namespace {

void check_single_head(Index n_q, Index n_k, Index d, Causal causal, std::mt19937_64& rng) {
  CAPTURE(n_q);
  CAPTURE(n_k);
  CAPTURE(d);
  CAPTURE(to_string(causal));
  AttentionOptions options;
  options.causal = causal;
  options.tiles = {16, 24};
  const Problem p = random_problem(n_q, n_k, d, rng);
  const ForwardFn forward = [&](const Matrix<double>& Q, const Matrix<double>& K,
                                const Matrix<double>& V) {
    return forward_q_outer(Q, K, V, options).O;
  };
  const auto f = forward_q_outer(p.Q, p.K, p.V, options);
  const auto g = backward_kv_outer(p.Q, p.K, p.V, f.O, f.L, p.dO, options);
  check_finite_differences(forward, p, 0, g.dQ, rng);
  check_finite_differences(forward, p, 1, g.dK, rng);
  check_finite_differences(forward, p, 2, g.dV, rng);
}

}  // namespace

TEST_CASE("gradients equal central finite differences over awkward shapes") {
  std::mt19937_64 rng(fresh_seed());
  for (Index n : {1, 3, 97, 128})
    for (Index d : {1, 59, 64})
      for (Causal causal : {Causal::none, Causal::top_left}) check_single_head(n, n, d, causal, rng);
}

TEST_CASE("gradients equal central finite differences with N_q != N_k and both alignments") {
  std::mt19937_64 rng(fresh_seed());
  for (Causal causal : {Causal::top_left, Causal::bottom_right}) {
    check_single_head(97, 128, 59, causal, rng);
    check_single_head(128, 97, 64, causal, rng);  // bottom-right: 31 rows see no key
    check_single_head(3, 1, 1, causal, rng);
  }
}

TEST_CASE("GQA: gradients of shared KV heads equal central finite differences") {
  std::mt19937_64 rng(fresh_seed());
  const Index batch = 2, heads_q = 4, heads_kv = 2, n = 33, d = 7;
  AttentionOptions options;
  options.causal = Causal::top_left;
  options.tiles = {8, 16};
  auto random_heads = [&](Index heads, Index rows) {
    HeadTensor<double> X(batch, heads, rows, d);
    for (auto& x : X.data) x = std::normal_distribution<double>()(rng);
    return X;
  };
  const auto Q = random_heads(heads_q, n), K = random_heads(heads_kv, n),
             V = random_heads(heads_kv, n), dO = random_heads(heads_q, n);
  const auto forward = forward_multihead(Q, K, V, options);
  const auto g = backward_multihead(Q, K, V, forward.O, forward.L, dO, options);

  // One KV head at a time: the loss is sum(dO o O) over every query head, and perturbing
  // KV head (b, h_kv) moves the outputs of every query head in its group.
  const Index b = 1, h_kv = 1;
  auto loss_with_kv = [&](const Matrix<double>& K_h, const Matrix<double>& V_h) {
    auto K2 = K, V2 = V;
    K2.head(b, h_kv) = K_h;
    V2.head(b, h_kv) = V_h;
    const auto O = forward_multihead(Q, K2, V2, options).O;
    double loss = 0;
    for (std::size_t i = 0; i < O.data.size(); ++i) loss += dO.data[i] * O.data[i];
    return loss;
  };
  const Matrix<double> K_h = K.head(b, h_kv), V_h = V.head(b, h_kv);
  const Matrix<double> dK_h = g.dK.head(b, h_kv), dV_h = g.dV.head(b, h_kv);
  for (const auto& [r, c] : entries_to_check(n, d, rng)) {
    Matrix<double> K_plus = K_h, K_minus = K_h, V_plus = V_h, V_minus = V_h;
    K_plus(r, c) += kStep;
    K_minus(r, c) -= kStep;
    V_plus(r, c) += kStep;
    V_minus(r, c) -= kStep;
    // The loss sums ~2000 terms of size ~1: its rounding, ~1e-13, divided by 2 kStep is
    // ~1e-8, still far below the tolerance.
    const double dK_numeric = (loss_with_kv(K_plus, V_h) - loss_with_kv(K_minus, V_h)) / (2 * kStep);
    const double dV_numeric = (loss_with_kv(K_h, V_plus) - loss_with_kv(K_h, V_minus)) / (2 * kStep);
    CAPTURE(r);
    CAPTURE(c);
    CHECK(std::abs(dK_numeric - dK_h(r, c)) <=
          kFiniteDifferenceTolerance * std::max(1.0, dK_h.cwiseAbs().maxCoeff()));
    CHECK(std::abs(dV_numeric - dV_h(r, c)) <=
          kFiniteDifferenceTolerance * std::max(1.0, dV_h.cwiseAbs().maxCoeff()));
  }
}

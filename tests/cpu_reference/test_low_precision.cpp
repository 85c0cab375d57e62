// bf16 and fp16 inputs with fp32 accumulation, judged by the rule of ANCHORS.md: the
// error against an fp64 reference is at most twice the error of naive attention computed
// in the same low precision.
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {
constexpr double kRule = 2.0;  // ANCHORS.md: forward error <= 2x the naive low-precision error

template <class In>
void check_rule(Index n_q, Index n_k, Index d, Causal causal, std::mt19937_64& rng) {
  CAPTURE(n_q);
  CAPTURE(n_k);
  CAPTURE(d);
  CAPTURE(to_string(causal));
  const Matrix<In> Q = random_matrix<In>(n_q, d, rng), K = random_matrix<In>(n_k, d, rng),
                   V = random_matrix<In>(n_k, d, rng);
  AttentionOptions options;
  options.causal = causal;
  options.tiles = {64, 48};
  // The reference sees exactly the same (already rounded) inputs, in fp64.
  const Matrix<double> O_ref = naive_attention<double>(Q.template cast<double>(),
                                                       K.template cast<double>(),
                                                       V.template cast<double>(), options).O;
  const double naive_error =
      (naive_attention(Q, K, V, options).O.template cast<double>() - O_ref).cwiseAbs().maxCoeff();
  for (const auto& r : {forward_q_outer(Q, K, V, options), forward_kv_outer(Q, K, V, options)}) {
    const Matrix<double> O = round_to<In>(r.O).template cast<double>();  // stored as In
    const double error = (O - O_ref).cwiseAbs().maxCoeff();
    CAPTURE(error);
    CAPTURE(naive_error);
    CHECK(error <= kRule * naive_error);
  }
}
}  // namespace

TEST_CASE("bf16 inputs, fp32 accumulation: within 2x of naive bf16 attention") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (Index n : {97, 1023})
    for (Index d : {59, 128})
      for (Causal causal : {Causal::none, Causal::top_left}) check_rule<bf16>(n, n, d, causal, rng);
  check_rule<bf16>(113, 203, 64, Causal::bottom_right, rng);
}

TEST_CASE("fp16 inputs, fp32 accumulation: within 2x of naive fp16 attention") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (Index n : {97, 1023}) check_rule<fp16>(n, n, 64, Causal::top_left, rng);
  check_rule<fp16>(203, 113, 111, Causal::none, rng);
}

TEST_CASE("fp32 tiled forward is close to fp64") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> Q = random_matrix<double>(1023, 64, rng), K = random_matrix<double>(1023, 64, rng),
                       V = random_matrix<double>(1023, 64, rng);
  const Matrix<double> O_ref = naive_attention(Q, K, V).O;
  const auto r = forward_q_outer<float>(Q.cast<float>(), K.cast<float>(), V.cast<float>());
  // fp32 carries ~7 digits; sums of ~1000 terms lose at most ~3 of them.
  CHECK((r.O.cast<double>() - O_ref).cwiseAbs().maxCoeff() < 1e-5);
}

// The naive backward in bf16 and fp16: each operator accumulates in fp32 and rounds its
// output to the input type. It is the baseline of the gradients' rule (ANCHORS.md: a fused
// kernel's dQ, dK, dV within 3x of its error), so it must really round, and only as much as
// one rounding per operator explains.
#include "flashlab/cpu/naive_backward.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <limits>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {

struct GradientErrors {
  double dQ, dK, dV, scale;  // max |X - X_ref|, and max |X_ref| over the three gradients
};

template <class In>
GradientErrors errors(Index n_q, Index n_k, Index d, Causal causal, std::mt19937_64& rng) {
  const Matrix<In> Q = random_matrix<In>(n_q, d, rng), K = random_matrix<In>(n_k, d, rng),
                   V = random_matrix<In>(n_k, d, rng), dO = random_matrix<In>(n_q, d, rng);
  AttentionOptions options;
  options.causal = causal;
  // The reference sees exactly the same (already rounded) inputs, in fp64.
  const auto ref =
      naive_backward<double>(Q.template cast<double>(), K.template cast<double>(),
                             V.template cast<double>(), dO.template cast<double>(), options);
  const auto low = naive_backward<In>(Q, K, V, dO, options);
  auto err = [](const Matrix<In>& X, const Matrix<double>& X_ref) {
    return (X.template cast<double>() - X_ref).cwiseAbs().maxCoeff();
  };
  const double scale = std::max(
      {ref.dQ.cwiseAbs().maxCoeff(), ref.dK.cwiseAbs().maxCoeff(), ref.dV.cwiseAbs().maxCoeff()});
  return {err(low.dQ, ref.dQ), err(low.dK, ref.dK), err(low.dV, ref.dV), scale};
}

// The bound: each of the 8 operators rounds its output once (relative error <= eps / 2 of
// In); carried through the products that follow, the rounding of P, dP, D and dS reaches
// the gradients scaled by the magnitudes of K, Q (about 1) summed over keys or rows with
// random signs. 32 eps of the largest gradient leaves a wide margin over what one rounding
// per operator explains (measured: about 0.5 to 1 eps) and still fails an operator done in In
// arithmetic throughout (N terms each rounded: about sqrt(N) eps and more) or a missing
// scale (errors of the gradients' own size).
template <class In>
void check(Index n_q, Index n_k, Index d, Causal causal, std::mt19937_64& rng) {
  CAPTURE(n_q);
  CAPTURE(n_k);
  CAPTURE(d);
  CAPTURE(to_string(causal));
  const double eps = double(std::numeric_limits<In>::epsilon());
  const GradientErrors e = errors<In>(n_q, n_k, d, causal, rng);
  CAPTURE(e.dQ);
  CAPTURE(e.dK);
  CAPTURE(e.dV);
  CAPTURE(e.scale);
  CHECK(e.dQ <= 32 * eps * e.scale);
  CHECK(e.dK <= 32 * eps * e.scale);
  CHECK(e.dV <= 32 * eps * e.scale);
  // And it does round: an fp32 result would be 100x closer.
  CHECK(std::max({e.dQ, e.dK, e.dV}) >= 0.01 * eps * e.scale);
}

}  // namespace

TEST_CASE("naive backward in bf16: fp32 accumulation, outputs rounded per operator") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  check<bf16>(97, 97, 64, Causal::none, rng);
  check<bf16>(113, 203, 64, Causal::bottom_right, rng);
  check<bf16>(203, 113, 128, Causal::top_left, rng);
  check<bf16>(1, 17, 64, Causal::none, rng);
}

TEST_CASE("naive backward in fp16: fp32 accumulation, outputs rounded per operator") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  check<fp16>(97, 97, 64, Causal::top_left, rng);
  check<fp16>(203, 113, 128, Causal::none, rng);
}

TEST_CASE("naive backward in fp32 is unchanged: fp32 arithmetic, nothing rounded further") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<float> Q = random_matrix<float>(33, 16, rng), K = random_matrix<float>(45, 16, rng),
                      V = random_matrix<float>(45, 16, rng), dO = random_matrix<float>(33, 16, rng);
  const auto g = naive_backward<float>(Q, K, V, dO);
  const auto ref = naive_backward<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>(),
                                          dO.cast<double>());
  // fp32 over 45 keys: a few hundred ulps at most, far below bf16's step.
  CHECK((g.dQ.cast<double>() - ref.dQ).cwiseAbs().maxCoeff() < 1e-4);
  CHECK((g.dK.cast<double>() - ref.dK).cwiseAbs().maxCoeff() < 1e-4);
  CHECK((g.dV.cast<double>() - ref.dV).cwiseAbs().maxCoeff() < 1e-4);
}

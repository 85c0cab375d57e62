// Why the running max matters: with scores of magnitude 1e4, exp overflows any float type,
// yet the tiled algorithm, which only ever exponentiates S - m <= 0, stays exact.
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

TEST_CASE("scores of magnitude 1e4: the tiled forward matches fp64, the unstable one is NaN") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Index n = 97, d = 16;
  // Entries ~N(0, 50^2), d = 16, scale 1/4: a score is a sum of 16 products of spread
  // 50 * 50, so its spread is 2500 * sqrt(16) / 4 = 2500, and the largest of 97^2 ~ 1e4.
  const Matrix<double> Q = random_matrix<double>(n, d, rng, 50.0);
  const Matrix<double> K = random_matrix<double>(n, d, rng, 50.0);
  const Matrix<double> V = random_matrix<double>(n, d, rng);
  AttentionOptions options;
  options.tiles = {16, 13};

  const auto reference = naive_attention(Q, K, V, options);
  REQUIRE(reference.S.cwiseAbs().maxCoeff() > 5e3);  // the premise: huge scores
  CHECK(reference.O.allFinite());

  // The textbook softmax computes exp(1e4) = inf, then inf / inf = NaN.
  const auto unstable = naive_attention(Q, K, V, options, SoftmaxKind::unstable);
  CHECK_FALSE(unstable.O.allFinite());

  // In fp64 and in fp32, both loop orders stay finite and agree with the fp64 reference.
  // fp64 scores of up to ~1e4 carry an absolute rounding error of |S| * 2^-53 ~ 1e-12, and
  // the tiled and naive orders round S - m differently, so the weights (and O, of order 1)
  // may differ by a few times that: compare at 16 |S|max 2^-53 (~2e-11 here).
  const double fp64_bound =
      16 * reference.S.cwiseAbs().maxCoeff() * std::numeric_limits<double>::epsilon() / 2;
  for (const auto& r : {forward_q_outer(Q, K, V, options), forward_kv_outer(Q, K, V, options)})
    CHECK((r.O - reference.O).cwiseAbs().maxCoeff() < fp64_bound);
  const Matrix<float> Qf = Q.cast<float>(), Kf = K.cast<float>(), Vf = V.cast<float>();
  const Matrix<double> O32 = forward_q_outer(Qf, Kf, Vf, options).O.cast<double>();
  CHECK(O32.allFinite());
  // fp32 scores of ~1e4 carry an absolute error of ~1e4 * 2^-24 ~ 1e-3, which moves the
  // weights by up to ~0.1%: compare at 1e-2 against outputs of order 1.
  const Matrix<double> O64_from_f32 =
      naive_attention(Q.cast<float>().cast<double>().eval(), K.cast<float>().cast<double>().eval(),
                      V.cast<float>().cast<double>().eval(), options).O;
  CHECK((O32 - O64_from_f32).cwiseAbs().maxCoeff() < 1e-2);
}

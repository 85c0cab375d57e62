// Softmax three ways: the textbook formula overflows, the stable one does not, and the
// online normaliser (m, l) agrees with the two-pass stable one.
#include "flashlab/cpu/softmax.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace flashlab::cpu;

TEST_CASE("stable softmax sums to one and matches the textbook formula on small scores") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (Index n : {1, 2, 97, 1023}) {
    const Vector<double> x = flashlab::test::random_matrix<double>(n, 1, rng, 3.0);
    const Vector<double> p = stable_softmax(x);
    CHECK(p.sum() == doctest::Approx(1.0).epsilon(1e-14));
    CHECK((p - unstable_softmax(x)).cwiseAbs().maxCoeff() < 1e-15);
    CHECK(p.minCoeff() >= 0.0);
  }
}

TEST_CASE("the textbook softmax overflows where the stable one does not") {
  // exp(100) overflows fp32 (largest finite ~3.4e38 = exp(88.7)); subtracting the max
  // makes every exponent <= 0.
  const Vector<float> x = (Vector<float>(3) << 100.0f, 99.0f, 98.0f).finished();
  const Vector<float> unstable = unstable_softmax(x);
  CHECK(std::isnan(unstable[0]));  // inf / inf
  const Vector<float> stable = stable_softmax(x);
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0);
  CHECK(stable[0] == doctest::Approx(1.0 / (1.0 + e1 + e2)).epsilon(1e-6));
  CHECK(stable[2] == doctest::Approx(e2 / (1.0 + e1 + e2)).epsilon(1e-6));
}

TEST_CASE("the online normaliser equals the two-pass one") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (Index n : {1, 2, 97, 1023}) {
    const Vector<double> x = flashlab::test::random_matrix<double>(n, 1, rng, 10.0);
    const auto online = online_normaliser(x);
    const double m = x.maxCoeff();
    CHECK(online.m == m);
    CHECK(online.l == doctest::Approx((x.array() - m).exp().sum()).epsilon(1e-14));
    CHECK(log_sum_exp(x) == doctest::Approx(online.m + std::log(online.l)).epsilon(1e-14));
  }
}

TEST_CASE("a row with no valid key: softmax is zero, the normaliser is (-inf, 0)") {
  const double inf = std::numeric_limits<double>::infinity();
  const Vector<double> x = Vector<double>::Constant(4, -inf);
  CHECK(stable_softmax(x).isZero());
  const auto n = online_normaliser(x);
  CHECK(n.m == -inf);
  CHECK(n.l == 0.0);
  CHECK(log_sum_exp(x) == -inf);
}

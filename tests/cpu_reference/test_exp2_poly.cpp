// 2^x on the FMA units: the fitted polynomial's accuracy, the exponent added as an integer,
// the edges of the domain (integers, 0, below -126, -inf, NaN, overflow), and ulp counting.
#include "flashlab/cpu/exp2_poly.hpp"
#include "flashlab/cpu/types.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace flashlab::cpu;

namespace {

// The fitted polynomial's worst relative error on [0, 1], evaluated here in fp64 on a grid
// finer than the fit's.
double max_relative_error(const std::vector<float>& c) {
  double worst = 0;
  for (int i = 0; i <= 1 << 16; ++i) {
    const double f = std::ldexp(double(i), -16);
    double p = 0;
    for (auto k = c.rbegin(); k != c.rend(); ++k) p = p * f + *k;
    worst = std::max(worst, std::fabs(p - std::exp2(f)) / std::exp2(f));
  }
  return worst;
}

float exact_exp2(float x) { return static_cast<float>(std::exp2(static_cast<double>(x))); }

}  // namespace

TEST_CASE("exp2 polynomial: p(0) = 1, and each degree fits 2^f better than the one before") {
  double previous = 1;
  for (int degree = 1; degree <= kExp2PolyMaxDegree; ++degree) {
    CAPTURE(degree);
    const auto c = fit_exp2_polynomial(degree);
    REQUIRE(c.size() == static_cast<std::size_t>(degree + 1));
    CHECK(c[0] == 1.0f);
    const double err = max_relative_error(c);
    if (degree <= 5) CHECK(err < previous / 4);  // until fp32 coefficients limit it
    previous = err;
  }
  // Degree 3, FlashAttention-4's choice: a relative error of order 1e-4, far below bf16's
  // half-ulp of 2^-9 = 2e-3.
  CHECK(max_relative_error(fit_exp2_polynomial(3)) < 2e-4);
  for (const int bad : {0, -1, kExp2PolyMaxDegree + 1})
    CHECK_THROWS_WITH_AS(fit_exp2_polynomial(bad), doctest::Contains("degree must lie in"),
                         InvalidArgument);
}

TEST_CASE("exp2 polynomial: integers are exact, the exponent added as an integer") {
  const auto c = fit_exp2_polynomial(3);
  for (int j = -126; j <= 127; ++j) {
    CAPTURE(j);
    CHECK(exp2_polynomial(float(j), c) == std::ldexp(1.0f, j));
  }
  CHECK(exp2_polynomial(0.0f, c) == 1.0f);
  CHECK(exp2_polynomial(-0.0f, c) == 1.0f);
}

TEST_CASE("exp2 polynomial: the edges of its domain") {
  const auto c = fit_exp2_polynomial(3);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(exp2_polynomial(-inf, c) == 0.0f);  // a masked score
  CHECK(exp2_polynomial(-126.5f, c) == 0.0f);
  CHECK(exp2_polynomial(std::nextafter(-126.0f, -200.0f), c) == 0.0f);
  CHECK(exp2_polynomial(-1000.0f, c) == 0.0f);
  CHECK(std::isnan(exp2_polynomial(std::numeric_limits<float>::quiet_NaN(), c)));
  CHECK(exp2_polynomial(128.0f, c) == inf);
  CHECK(exp2_polynomial(inf, c) == inf);
  // Just above -126 the result is the smallest normals, not garbage from the integer add.
  const float low = exp2_polynomial(-125.9f, c);
  CHECK(low >= std::numeric_limits<float>::min());
  CHECK(low == doctest::Approx(std::exp2(-125.9)).epsilon(2e-4));
}

TEST_CASE("exp2 polynomial: ulps against std::exp2 within what the fit's error allows") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  std::uniform_real_distribution<float> x_of(-126.0f, 0.0f);
  for (int degree = 2; degree <= 5; ++degree) {
    CAPTURE(degree);
    const auto c = fit_exp2_polynomial(degree);
    // A relative error e of a value m * 2^k, m in [1, 2), is e m 2^23 ulps of 2^(k-23): up to
    // 2 e 2^23, plus rounding in Horner's rule and in f.
    const double allowed = 2 * max_relative_error(c) * std::ldexp(1.0, kFloatMantissaBits) + 4;
    std::int64_t worst = 0;
    for (int i = 0; i < 100000; ++i) {
      const float x = x_of(rng);
      worst = std::max(worst, ulp_distance(exp2_polynomial(x, c), exact_exp2(x)));
    }
    CHECK(double(worst) <= allowed);
    CHECK(worst > 0);  // an approximation, not the exact function
  }
}

TEST_CASE("exp2 polynomial: rounded to bf16, degree 3 is at most one bf16 ulp off") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  std::uniform_real_distribution<float> x_of(-20.0f, 0.0f);
  const auto c = fit_exp2_polynomial(3);
  for (int i = 0; i < 100000; ++i) {
    const float x = x_of(rng);
    const float poly = static_cast<float>(bf16(exp2_polynomial(x, c)));
    const float exact = static_cast<float>(bf16(exact_exp2(x)));
    // bf16 keeps float's top 16 bits: a bf16 ulp is 2^16 float ulps.
    CHECK(ulp_distance(poly, exact) <= (1 << 16));
  }
}

TEST_CASE("ulp distance counts the floats between two floats") {
  CHECK(ulp_distance(1.0f, 1.0f) == 0);
  CHECK(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ulp_distance(1.0f, 2.0f) == std::int64_t{1} << kFloatMantissaBits);
  CHECK(ulp_distance(-0.0f, 0.0f) == 0);
  const float tiny = std::numeric_limits<float>::denorm_min();
  CHECK(ulp_distance(-tiny, tiny) == 2);
  CHECK(ulp_distance(-1.0f, 1.0f) == 2 * ulp_distance(0.0f, 1.0f));
  CHECK_THROWS_AS(ulp_distance(std::numeric_limits<float>::infinity(), 1.0f), InvalidArgument);
  CHECK_THROWS_AS(ulp_distance(1.0f, std::numeric_limits<float>::quiet_NaN()), InvalidArgument);
}

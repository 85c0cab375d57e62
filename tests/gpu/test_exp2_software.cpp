// software_exp2 (flashlab/gpu/exp2_software.hpp), the very code fa3's softmax runs, on the
// CPU: its relative error over a dense sweep of [-126, 8] (the softmax's x <= 0, and up to
// the conditional rule's tau = 8 should the two switches ever be combined) stays under the
// bound the header states and comes close
// to it (the bound is the fit's, not a loose guess), integers are exact, and the clamp's
// edges give what the header says.
#include <doctest/doctest.h>

#include "flashlab/gpu/exp2_software.hpp"
#include "random_inputs.hpp"

#include <cmath>
#include <limits>
#include <random>

namespace flashlab::gpu {
namespace {

double relative_error(float x) {
  const double exact = std::exp2(double(x));
  return std::fabs(double(software_exp2(x)) - exact) / exact;
}

constexpr float kSweepLow = -126.0f, kSweepHigh = 8.0f;

TEST_CASE("software_exp2: relative error under the stated bound over [-126, 8]") {
  double worst = 0.0;
  float worst_x = 0.0f;
  const auto visit = [&](float x) {
    const double err = relative_error(x);
    if (err > worst) worst = err, worst_x = x;
  };
  // Every multiple of 2^-14, then each integer's neighbours (where f wraps from 1 to 0),
  // then fresh random points.
  constexpr int kStepsPerUnit = 1 << 14;
  for (int64_t i = int64_t(kSweepLow) * kStepsPerUnit; i <= int64_t(kSweepHigh) * kStepsPerUnit;
       ++i)
    visit(float(double(i) / kStepsPerUnit));
  for (int n = int(kSweepLow); n <= int(kSweepHigh); ++n) {
    visit(std::nextafter(float(n), -200.0f));
    visit(std::nextafter(float(n), 200.0f));
  }
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_real_distribution<float> uniform(kSweepLow, kSweepHigh);
  for (int i = 0; i < 1 << 20; ++i) visit(uniform(rng));
  INFO("worst relative error ", worst, " at x = ", worst_x, "; bound ",
       kSoftwareExp2MaxRelativeError);
  CHECK(worst <= kSoftwareExp2MaxRelativeError);
  // The bound is the fit's worst error, not a loose one: the sweep comes within 2% of it.
  CHECK(worst >= 0.98 * kSoftwareExp2MaxRelativeError);
}

TEST_CASE("software_exp2: integers, 0 above all, are exact") {
  for (int n = int(kSoftwareExp2Min) + 1; n <= int(kSoftwareExp2Max); ++n) {
    CAPTURE(n);
    CHECK(software_exp2(float(n)) == std::ldexp(1.0f, n));
  }
  CHECK(software_exp2(0.0f) == 1.0f);  // the row max's own weight
  CHECK(software_exp2(-0.0f) == 1.0f);
  // Just below an integer, f rounds to 1 at worst: p(1) = 2 keeps the result continuous.
  CHECK(software_exp2(std::nextafter(0.0f, -1.0f)) == doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("software_exp2: the clamp's edges") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(software_exp2(kSoftwareExp2Min) == 0.0f);
  CHECK(!std::signbit(software_exp2(kSoftwareExp2Min)));
  CHECK(software_exp2(-1000.0f) == 0.0f);
  CHECK(software_exp2(-inf) == 0.0f);
  CHECK(software_exp2(std::numeric_limits<float>::quiet_NaN()) == 0.0f);
  // Between -127 and -126: small and non-negative, below the smallest normal float.
  for (const float x : {-126.999f, -126.5f, -126.001f}) {
    CAPTURE(x);
    const float y = software_exp2(x);
    CHECK(y >= 0.0f);
    CHECK(y < std::numeric_limits<float>::min());
  }
  // At -126 the smallest normal, exactly; the top of the clamp and past it, 2^127.
  CHECK(software_exp2(-126.0f) == std::numeric_limits<float>::min());
  CHECK(software_exp2(kSoftwareExp2Max) == std::ldexp(1.0f, 127));
  CHECK(software_exp2(1000.0f) == std::ldexp(1.0f, 127));
  CHECK(software_exp2(inf) == std::ldexp(1.0f, 127));
  // Just under 127 the result stays finite (p < 2 with n = 126).
  CHECK(std::isfinite(software_exp2(std::nextafter(kSoftwareExp2Max, 0.0f))));
  CHECK(relative_error(126.75f) <= kSoftwareExp2MaxRelativeError);
}

}  // namespace
}  // namespace flashlab::gpu

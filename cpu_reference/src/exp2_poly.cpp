#include "flashlab/cpu/exp2_poly.hpp"

#include "flashlab/cpu/types.hpp"

#include <Eigen/QR>

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

namespace flashlab::cpu {

namespace {

constexpr Index kFitPoints = 4097;  // the grid f = i / 4096 on [0, 1]

// A float's bits as an integer that grows with the float: negative floats are mirrored
// below zero, so that consecutive floats are consecutive integers (and -0 == +0).
std::int64_t ordered(float x) {
  const auto bits = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(x));
  return bits >= 0 ? bits : std::int64_t{std::numeric_limits<std::int32_t>::min()} - bits;
}

}  // namespace

std::vector<float> fit_exp2_polynomial(int degree) {
  if (degree < 1 || degree > kExp2PolyMaxDegree) {
    std::ostringstream why;
    why << "a polynomial for 2^f of degree " << degree << ": the degree must lie in [1, "
        << kExp2PolyMaxDegree << "] (FlashAttention-4 uses a low degree, about 3)";
    throw InvalidArgument(why.str());
  }
  // p(f) = 1 + sum_{k>=1} c_k f^k; minimise sum_i ((p(f_i) - 2^f_i) / 2^f_i)^2, i.e. the
  // least-squares problem  A c = b  with A_ik = f_i^k / 2^f_i  and  b_i = 1 - 1 / 2^f_i.
  Matrix<double> A(kFitPoints, degree);
  Vector<double> b(kFitPoints);
  for (Index i = 0; i < kFitPoints; ++i) {
    const double f = static_cast<double>(i) / (kFitPoints - 1), exact = std::exp2(f);
    for (int k = 1; k <= degree; ++k) A(i, k - 1) = std::pow(f, k) / exact;
    b[i] = 1.0 - 1.0 / exact;
  }
  const Vector<double> c = A.colPivHouseholderQr().solve(b);
  std::vector<float> coefficients{1.0f};
  for (int k = 0; k < degree; ++k) coefficients.push_back(static_cast<float>(c[k]));
  return coefficients;
}

float exp2_polynomial(float x, const std::vector<float>& coefficients) {
  if (std::isnan(x)) return x;
  if (x < kExp2PolyMinArgument) return 0.0f;  // flushed, and -inf (masked) on the way
  if (x >= kExp2PolyOverflow) return std::numeric_limits<float>::infinity();
  const float j = std::floor(x);
  const float f = x - j;          // in [0, 1]: exact for |x| >= 1, rounded to 1 at worst above -1
  float p = coefficients.back();  // Horner: one FMA per degree
  for (auto c = coefficients.rbegin() + 1; c != coefficients.rend(); ++c) p = std::fma(p, f, *c);
  // 2^j: add j to p's exponent field. p lies in [1, 2] and j in [-126, 127], so the result's
  // exponent stays in range and the add cannot carry into the sign bit.
  const auto bits = std::bit_cast<std::int32_t>(p) +
                    (static_cast<std::int32_t>(j) * (std::int32_t{1} << kFloatMantissaBits));
  return std::bit_cast<float>(bits);
}

std::int64_t ulp_distance(float a, float b) {
  if (!std::isfinite(a) || !std::isfinite(b))
    throw InvalidArgument("ulp distance between non-finite floats: both must be finite");
  const std::int64_t d = ordered(a) - ordered(b);
  return d >= 0 ? d : -d;
}

}  // namespace flashlab::cpu

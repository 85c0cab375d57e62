// e4m3 encoding as arithmetic on the grid: find the spacing of the e4m3 values around |x|,
// count how many spacings |x| is, round that count to the nearest integer (ties to even),
// and read the code off the count. Everything is exact in double: |x| is a float and the
// spacing a power of two.
#include "flashlab/cpu/fp8.hpp"

#include <cmath>

namespace flashlab::cpu {

namespace {

constexpr int kValuesPerBinade = 1 << kE4m3MantissaBits;  // 8
constexpr int kExponentField = 0x0F, kMantissaField = 0x07;

// t rounded to the nearest integer, ties to the even one, whatever the FPU's rounding mode.
double round_half_even(double t) {
  const double below = std::floor(t), rest = t - below;
  if (rest > 0.5) return below + 1;
  if (rest < 0.5) return below;
  return std::fmod(below, 2.0) == 0 ? below : below + 1;
}

}  // namespace

float decode_e4m3(std::uint8_t code) {
  const bool negative = (code & kE4m3SignBit) != 0;
  const int e = (code >> kE4m3MantissaBits) & kExponentField, m = code & kMantissaField;
  if (e == kExponentField && m == kMantissaField) return std::nanf("");
  const double magnitude =
      e == 0 ? std::ldexp(m, kE4m3MinNormalExponent - kE4m3MantissaBits)  // m/8 * 2^-6
             : std::ldexp(kValuesPerBinade + m, e - kE4m3Bias - kE4m3MantissaBits);
  return static_cast<float>(negative ? -magnitude : magnitude);
}

std::uint8_t encode_e4m3(float x) {
  const std::uint8_t sign = std::signbit(x) ? kE4m3SignBit : 0;
  if (std::isnan(x)) return sign | kE4m3NaN;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= kE4m3Max) return sign | static_cast<std::uint8_t>(kE4m3NaN - 1);  // saturate: 448
  // The binade of a, 2^k <= a < 2^(k+1), but never below the normal range: under 2^-6 the
  // subnormals keep the spacing of the first normal binade.
  int frexp_exponent = 0;
  std::frexp(a, &frexp_exponent);  // a = f * 2^frexp_exponent, f in [0.5, 1)
  const int k =
      a == 0 ? kE4m3MinNormalExponent : std::max(frexp_exponent - 1, kE4m3MinNormalExponent);
  const double spacing = std::ldexp(1.0, k - kE4m3MantissaBits);  // 2^(k-3)
  // q spacings: 8..16 in a normal binade (16 when rounding carries into the next binade),
  // 0..8 below 2^-6. The code counts values from zero, 8 per binade, so it is
  // (k + 6) * 8 + q in every case: at k = -6 it is q itself (subnormal or 2^-6), and q = 16
  // lands on the first code of binade k + 1.
  const double q = round_half_even(a / spacing);
  const int code = (k - kE4m3MinNormalExponent) * kValuesPerBinade + static_cast<int>(q);
  return sign | static_cast<std::uint8_t>(code);
}

float round_to_e4m3(float x) { return decode_e4m3(encode_e4m3(x)); }

}  // namespace flashlab::cpu

// e4m3 against its definition: all 256 codes decoded by the format's formula, re-encoded to
// themselves, rounding checked against a brute-force search for the nearest value (ties to
// the even code) at every midpoint and on random floats, saturation at 448, subnormals.
#include "flashlab/cpu/fp8.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace flashlab::cpu;

namespace {

// The value of a code from the format's table, written out independently of fp8.cpp:
// sign, then exponent field E and mantissa field M; E = 0 is subnormal.
double by_formula(int code) {
  const int s = code >> 7, E = (code >> 3) & 15, M = code & 7;
  const double magnitude = E == 0 ? M * std::pow(2.0, -9) : (1.0 + M / 8.0) * std::pow(2.0, E - 7);
  return s ? -magnitude : magnitude;
}

bool is_nan_code(int code) { return (code & 0x7F) == 0x7F; }

// The code nearest x by trying every finite code; on a tie, the even one. Saturation is
// part of the contract rather than of nearness, so |x| >= 448 is not asked of it.
int nearest_by_search(double x) {
  int best = -1;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int code = 0; code < 256; ++code) {
    if (is_nan_code(code)) continue;
    if ((code & 0x80) != (std::signbit(x) ? 0x80 : 0)) continue;  // keep x's sign (and -0)
    const double distance = std::fabs(by_formula(code) - x);
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("e4m3: every code decodes to the format's value") {
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const float v = decode_e4m3(static_cast<std::uint8_t>(code));
    if (is_nan_code(code))
      CHECK(std::isnan(v));
    else
      CHECK(static_cast<double>(v) == by_formula(code));
  }
  // The landmarks of the format, from its definition.
  CHECK(decode_e4m3(0x7E) == 448.0f);
  CHECK(decode_e4m3(0xFE) == -448.0f);
  CHECK(decode_e4m3(0x38) == 1.0f);
  CHECK(decode_e4m3(0x08) == std::ldexp(1.0f, -6));
  CHECK(decode_e4m3(0x01) == std::ldexp(1.0f, -9));
  CHECK(decode_e4m3(0x07) == 7 * std::ldexp(1.0f, -9));
  CHECK(std::signbit(decode_e4m3(0x80)));
  CHECK(decode_e4m3(0x80) == 0.0f);
}

TEST_CASE("e4m3: every code re-encodes to itself, NaN to the NaN code") {
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const auto c = static_cast<std::uint8_t>(code);
    if (is_nan_code(code))
      CHECK((encode_e4m3(decode_e4m3(c)) & 0x7F) == kE4m3NaN);
    else
      CHECK(encode_e4m3(decode_e4m3(c)) == c);
  }
  CHECK(encode_e4m3(std::numeric_limits<float>::quiet_NaN()) == kE4m3NaN);
}

TEST_CASE("e4m3: a value halfway between two neighbours goes to the even code") {
  // Every pair of neighbouring finite values of one sign: the midpoint (exact in float),
  // and one float either side of it.
  for (int sign : {0, 0x80})
    for (int code = 0; code < 0x7E; ++code) {
      CAPTURE(code);
      const float a = decode_e4m3(static_cast<std::uint8_t>(sign | code));
      const float b = decode_e4m3(static_cast<std::uint8_t>(sign | (code + 1)));
      const float mid = (a + b) / 2;
      const int even = code % 2 == 0 ? code : code + 1;
      CHECK(encode_e4m3(mid) == (sign | even));
      CHECK(encode_e4m3(std::nextafter(mid, a)) == (sign | code));
      CHECK(encode_e4m3(std::nextafter(mid, b)) == (sign | (code + 1)));
    }
  // Below the smallest subnormal: 2^-10 is the tie between 0 and 2^-9, and goes to 0.
  CHECK(encode_e4m3(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(encode_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)) == 0x01);
  CHECK(encode_e4m3(std::ldexp(1.0f, -30)) == 0x00);
  CHECK(encode_e4m3(-std::ldexp(1.0f, -30)) == 0x80);
}

TEST_CASE("e4m3: random floats round to the nearest value that a search finds") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  std::uniform_real_distribution<double> exponent(-14.0, 9.0);  // 2^-14 to 2^9 = 512
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>((rng() & 1 ? -1 : 1) * std::exp2(exponent(rng)));
    CAPTURE(x);
    if (std::fabs(x) >= kE4m3Max) continue;  // saturation: the next case
    CHECK(encode_e4m3(x) == nearest_by_search(x));
  }
}

TEST_CASE("e4m3: 448 and beyond saturate to +-448, infinities too") {
  for (const float x :
       {448.0f, 448.5f, 464.0f, 480.0f, 1e6f, 3e38f, std::numeric_limits<float>::infinity()}) {
    CAPTURE(x);
    CHECK(encode_e4m3(x) == 0x7E);
    CHECK(encode_e4m3(-x) == 0xFE);
    CHECK(round_to_e4m3(x) == kE4m3Max);
  }
  // Just below 448 still rounds within the format: 432 is the tie between 416 and 448.
  CHECK(round_to_e4m3(432.0f) == 448.0f);  // 448 = 1.75 * 2^8 has the even code 0x7E
  CHECK(round_to_e4m3(std::nextafter(432.0f, 0.0f)) == 416.0f);
}

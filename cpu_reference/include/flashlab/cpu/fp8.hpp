// The FP8 format e4m3 that FlashAttention-3 feeds Hopper's FP8 tensor cores, emulated on the
// CPU: one sign bit, four exponent bits (bias 7), three mantissa bits, no infinities.
//
//   code s eeee mmm     value
//   e = 0               (-1)^s * m/8 * 2^-6        subnormals: multiples of 2^-9 below 2^-6
//   e = 1..15           (-1)^s * (1 + m/8) * 2^(e-7)
//   e = 15, m = 7       NaN (the only one; e = 15 with m < 7 are numbers, up to 448)
//
// So each binade [2^k, 2^(k+1)) holds 8 values, 2^(k-3) apart; the largest finite value is
// 1.75 * 2^8 = 448, the smallest normal 2^-6 and the smallest subnormal 2^-9. 126 positive
// finite values, as many negative ones, two zeros and two NaNs: 256 codes.
// Encoding rounds to the nearest value, ties to the even code (the one whose last mantissa
// bit is 0), and saturates: anything of magnitude 448 or more, infinities included, becomes
// +-448 (what the hardware's `cvt.rn.satfinite` conversion does). NaN stays NaN.
#pragma once

#include <cstdint>

namespace flashlab::cpu {

inline constexpr float kE4m3Max = 448.0f;  // 1.75 * 2^8, code 0x7E
inline constexpr int kE4m3MantissaBits = 3;
inline constexpr int kE4m3Bias = 7;
inline constexpr int kE4m3MinNormalExponent = 1 - kE4m3Bias;  // 2^-6, code 0x08
inline constexpr std::uint8_t kE4m3NaN = 0x7F;                // s 1111 111 (and 0xFF)
inline constexpr std::uint8_t kE4m3SignBit = 0x80;

// The value of an e4m3 code (NaN for 0x7F and 0xFF). Exact: every e4m3 value is a float.
float decode_e4m3(std::uint8_t code);

// The e4m3 code nearest x: ties to even, saturating at +-448, NaN to 0x7F (with x's sign).
std::uint8_t encode_e4m3(float x);

// x rounded to the e4m3 grid: decode_e4m3(encode_e4m3(x)).
float round_to_e4m3(float x);

}  // namespace flashlab::cpu

// The exponential 2^x as FlashAttention-4 computes part of it: on the FMA units, as a
// polynomial, instead of on the special-function unit. Cody-Waite range reduction splits
//   x = j + f,   j = floor(x),   f in [0, 1),   so   2^x = 2^j * 2^f,
// 2^f comes from a low-degree polynomial p(f) evaluated by Horner's rule (one FMA per
// degree), and 2^j costs no arithmetic at all: j is added to the exponent field of p's
// float bits, an integer add of j << 23.
//
// The polynomial is fitted here, in fp64: least squares of the relative error
// (p(f) - 2^f) / 2^f over a fine grid of [0, 1], with p(0) = 1 fixed so that every integer
// x, and x = 0 above all (the row max's own weight), comes out exact.
//
// Domain: the softmax calls it with x = S - m <= 0. For x < -126 the result would be
// subnormal and is flushed to 0 (as the hardware's ex2.approx.ftz does); -inf (a masked
// score) gives 0, NaN gives NaN, and x >= 128 gives +inf.
#pragma once

#include <cstdint>
#include <vector>

namespace flashlab::cpu {

inline constexpr int kFloatMantissaBits = 23;           // where the exponent field starts
inline constexpr float kExp2PolyMinArgument = -126.0f;  // 2^-126, the smallest normal float
inline constexpr float kExp2PolyOverflow = 128.0f;      // 2^128 does not fit a float
inline constexpr int kExp2PolyMaxDegree = 7;

// The coefficients c_0 = 1, c_1, ..., c_degree of p(f) = sum_k c_k f^k, rounded to fp32.
// Throws InvalidArgument unless 1 <= degree <= kExp2PolyMaxDegree.
std::vector<float> fit_exp2_polynomial(int degree);

// 2^x by range reduction and p (coefficients from fit_exp2_polynomial), in fp32 with FMAs.
float exp2_polynomial(float x, const std::vector<float>& coefficients);

// The number of floats strictly between a and b, plus one (0 when a == b; +-0 are equal).
// Both must be finite.
std::int64_t ulp_distance(float a, float b);

}  // namespace flashlab::cpu

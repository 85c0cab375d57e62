// 2^x on the FMA pipe instead of the special-function unit (MUFU), FlashAttention-4's way of
// taking part of the online softmax's exponentials off a unit that does only 16 a clock per
// SM. fa3 calls it for a share of W's elements (fa3::kSoftwareExp2Period, kernel_info.hpp);
// the CPU tests call the very same code (FLASHLAB_HOST_DEVICE).
//
// Cody-Waite range reduction:
//   x = n + f,   n = floor(x),   f in [0, 1),   so   2^x = 2^n * 2^f,
// 2^f = p(f) = 1 + c1 f + c2 f^2 + c3 f^3 by Horner's rule (three FMAs), and 2^n by adding
// n to the exponent field of p's bits (one integer shift-and-add: p lies in [1, 2]).
// floor(x) is taken without a conversion instruction (16 a clock per SM, MUFU's rate): adding
// 1.5 * 2^23 rounded toward -inf leaves floor(x) in the low mantissa bits of the sum, and
// the sum minus 1.5 * 2^23 is floor(x) as a float, exactly.
// Per exponential: 2 min/max (the clamp), 3 adds, 3 FMAs, 1 shift-and-add; no MUFU.
//
// The coefficients: fitted by scripts/fit_exp2_software.py (numpy and scipy), minimax of the
// relative error (p(f) - 2^f) / 2^f over [0, 1] as a linear programme on 2^16 + 1 points,
// with p(0) = 1 and p(1) = 2 fixed (so every integer x, x = 0 included, comes out exact and
// the result is continuous where f wraps from 1 to 0), then rounded to fp32. Their worst
// relative error, measured again on a 16 times finer grid in fp32 Horner: 1.0313e-4.
//
// What it returns (float x):
//   x in [-126, 127]: 2^x within kSoftwareExp2MaxRelativeError (bf16's half-ulp is 2^-9,
//     fp16's 2^-12: both far above);
//   x in (-127, -126): a value in [0, 2^-126) (the exponent field is 0, so the bits read as
//     a subnormal: small, not 2^x to that relative error; ex2.approx.ftz gives 0 there);
//   x <= -127 and x = -inf: +0, exactly;
//   x > 127 and x = +inf: 2^127 (not +inf: the clamp);
//   NaN: +0 (the clamp drops it). fa3 calls it only where the scores are finite (the
//     unmasked tiles), with x = (S - m) scale log2 e <= 0 (it is compiled with the standard
//     rescale only; under FlashAttention-4's conditional rule x would reach tau = 8).
#pragma once

#include "flashlab/gpu/host_device.hpp"

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cmath>
#include <cstring>
#endif

namespace flashlab::gpu {

// p(f) = 1 + c1 f + c2 f^2 + c3 f^3 (scripts/fit_exp2_software.py).
inline constexpr float kExp2C1 = 0.6954242587089539f;
inline constexpr float kExp2C2 = 0.2263076901435852f;
inline constexpr float kExp2C3 = 0.07826802134513855f;
// The worst relative error against 2^x on [-126, 127]: the fit's 1.0313e-4 rounded up,
// which also covers the rounding of f = x - floor(x) (at most 2^-25 absolute, for x in
// (-1, 0); 2^-25 ln 2 = 2.1e-8 relative).
inline constexpr float kSoftwareExp2MaxRelativeError = 1.04e-4f;
// The clamp: below it 2^x is +0, above it 2^127.
inline constexpr float kSoftwareExp2Min = -127.0f;
inline constexpr float kSoftwareExp2Max = 127.0f;
// 1.5 * 2^23: for |x| < 2^22, x + this lies in [2^23, 2^24), where the floats are the
// integers; rounded toward -inf, the sum is this + floor(x).
inline constexpr float kFloorShift = 12582912.0f;
inline constexpr int kFloatMantissaBitCount = 23;  // where the exponent field starts

FLASHLAB_HOST_DEVICE int32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(x);
#else
  int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

FLASHLAB_HOST_DEVICE float float_from_bits(int32_t bits) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// kFloorShift + floor(x), for x in [kSoftwareExp2Min, kSoftwareExp2Max]: one add rounded
// toward -inf on the device; the same value on the host, where floor(x) + kFloorShift is
// exact.
FLASHLAB_HOST_DEVICE float shifted_floor(float x) {
#if defined(__CUDA_ARCH__)
  return __fadd_rd(x, kFloorShift);
#else
  return std::floor(x) + kFloorShift;
#endif
}

FLASHLAB_HOST_DEVICE float clamp_exp2_argument(float x) {
#if defined(__CUDA_ARCH__)
  return fminf(fmaxf(x, kSoftwareExp2Min), kSoftwareExp2Max);
#else
  return std::fmin(std::fmax(x, kSoftwareExp2Min), kSoftwareExp2Max);
#endif
}

FLASHLAB_HOST_DEVICE float fused_multiply_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return fmaf(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// 2^x on the FMA pipe; see the top of the file for what it returns at the edges.
FLASHLAB_HOST_DEVICE float software_exp2(float x) {
  x = clamp_exp2_argument(x);
  const float shifted = shifted_floor(x);       // kFloorShift + n
  const float f = x - (shifted - kFloorShift);  // in [0, 1]; exact for |x| >= 1
  const float p =
      fused_multiply_add(fused_multiply_add(fused_multiply_add(kExp2C3, f, kExp2C2), f, kExp2C1), f,
                         1.0f);  // 2^f, in [1, 2]
  // n is the low bits of shifted's bits (the shift is 3 * 2^22 in the ulps of 2^23), and
  // shifting them up by 23 drops the shift's own bits: shifted's bits << 23 = n << 23
  // (modulo 2^32, two's complement). Added to p's exponent field: 2^n p.
  const uint32_t n_field = uint32_t(float_bits(shifted)) << kFloatMantissaBitCount;
  return float_from_bits(int32_t(uint32_t(float_bits(p)) + n_field));
}

}  // namespace flashlab::gpu

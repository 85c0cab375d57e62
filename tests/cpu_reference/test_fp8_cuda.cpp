// e4m3 against NVIDIA's own conversion: cuda_fp8.h's host functions (no GPU needed) encode
// every float the tests pick and decode all 256 codes; flashlab's emulation must agree bit
// for bit, saturating mode included. Built only where the CUDA toolkit is installed.
#include "flashlab/cpu/fp8.hpp"
#include "random_inputs.hpp"

#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace flashlab::cpu;

namespace {

std::uint8_t nvidia_encode(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

float nvidia_decode(std::uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(code, __NV_E4M3);
  return static_cast<float>(__half(h));
}

}  // namespace

TEST_CASE("e4m3: all 256 codes decode as NVIDIA's conversion decodes them") {
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const auto c = static_cast<std::uint8_t>(code);
    const float ours = decode_e4m3(c), theirs = nvidia_decode(c);
    if (std::isnan(theirs))
      CHECK(std::isnan(ours));
    else
      CHECK(ours == theirs);
  }
}

TEST_CASE("e4m3: encoding agrees with NVIDIA's satfinite conversion") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  std::uniform_real_distribution<double> exponent(-16.0, 12.0);
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>((rng() & 1 ? -1 : 1) * std::exp2(exponent(rng)));
    CAPTURE(x);
    CHECK(encode_e4m3(x) == nvidia_encode(x));
  }
  // Every midpoint between neighbours, and one float either side.
  for (int code = 0; code < 0x7E; ++code) {
    const float mid = (decode_e4m3(std::uint8_t(code)) + decode_e4m3(std::uint8_t(code + 1))) / 2;
    for (const float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) {
      CAPTURE(x);
      CHECK(encode_e4m3(x) == nvidia_encode(x));
      CHECK(encode_e4m3(-x) == nvidia_encode(-x));
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (const float x : {0.0f, -0.0f, 448.0f, 464.0f, 1e9f, inf, -inf})
    CHECK(encode_e4m3(x) == nvidia_encode(x));
}

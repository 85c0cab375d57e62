// fa3's wgmma descriptors and TMA tensor maps on one tile, against a CPU product of the same
// bf16 inputs (hopper_tile.hpp). A wrong swizzle, slab offset, leading or stride byte offset
// permutes or mixes elements, which moves entries of S and U by O(1); rounding alone moves
// them by fp32's 2^-24 per term.
#include "hopper_tile.hpp"

#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace flashlab::gpu::test {
namespace {

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float x;
  std::memcpy(&x, &wide, sizeof x);
  return x;
}
// Round to nearest even, as the device's cvt.rn.bf16x2.f32 does (finite inputs only here).
uint16_t float_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

std::vector<uint16_t> random_bf16(size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<uint16_t> out(count);
  for (uint16_t& x : out) x = float_to_bf16(uniform(rng));
  return out;
}

// fp32 accumulation of n products: each partial sum is rounded once per term, so the
// error stays below n * 2^-24 * sum |a b|; 2^-12 (16x the worst case at n = 128) keeps
// a margin for the tensor cores' accumulation order while any misplaced element fails.
constexpr double kRelativeTolerance = 1.0 / 4096;

void check_tile(int d) {
  const uint64_t seed = ::flashlab::test::fresh_seed();
  std::mt19937_64 rng(seed);
  const auto A = random_bf16(size_t(kTileM) * d, rng);
  const auto B = random_bf16(size_t(kTileN) * d, rng);
  const auto V = random_bf16(size_t(kTileN) * d, rng);
  const TileProducts got = hopper_tile_products(d, A, B, V);
  INFO("d=", d, " seed=", seed);
  int bad_s = 0, bad_u = 0;
  for (int i = 0; i < kTileM; ++i)
    for (int j = 0; j < kTileN; ++j) {
      double exact = 0, magnitude = 0;
      for (int k = 0; k < d; ++k) {
        const double term = double(bf16_to_float(A[i * d + k])) * bf16_to_float(B[j * d + k]);
        exact += term;
        magnitude += std::fabs(term);
      }
      if (!(std::fabs(got.S[i * kTileN + j] - exact) <= kRelativeTolerance * magnitude)) ++bad_s;
    }
  for (int i = 0; i < kTileM; ++i)
    for (int c = 0; c < d; ++c) {
      double exact = 0, magnitude = 0;
      for (int j = 0; j < kTileN; ++j) {
        const double p = bf16_to_float(float_to_bf16(got.S[i * kTileN + j]));
        const double term = p * bf16_to_float(V[j * d + c]);
        exact += term;
        magnitude += std::fabs(term);
      }
      if (!(std::fabs(got.U[i * d + c] - exact) <= kRelativeTolerance * magnitude)) ++bad_u;
    }
  CHECK(bad_s == 0);  // S = A B^T: TMA + K-major descriptors
  CHECK(bad_u == 0);  // U = bf16(S) V: registers as A + MN-major descriptor of V
}

TEST_CASE("hopper tile: make_tensor_map returns the descriptor the driver encoded") {
  const EncodedMaps maps = encoded_tensor_maps();
  const auto nonzero = [](const std::vector<uint8_t>& bytes) {
    for (uint8_t b : bytes)
      if (b != 0) return true;
    return false;
  };
  CHECK(nonzero(maps.first));
  CHECK(maps.first == maps.first_again);  // a map is a function of the tensor alone
  CHECK(maps.first != maps.second);       // ... and the tensor's address is in it
}

TEST_CASE("hopper tile: S = A B^T and U = bf16(S) V through TMA and wgmma, d = 128") {
  check_tile(128);
}

TEST_CASE("hopper tile: S = A B^T and U = bf16(S) V through TMA and wgmma, d = 64") {
  check_tile(64);
}

}  // namespace
}  // namespace flashlab::gpu::test

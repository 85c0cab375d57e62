#include "flashlab/cpu/philox.hpp"

namespace flashlab::cpu {

namespace {

constexpr int kWordBits = 32;

struct HiLo {
  std::uint32_t hi, lo;
};

// The 64-bit product of two 32-bit words, split into its high and low halves.
HiLo mulhilo(std::uint32_t a, std::uint32_t b) {
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  return {static_cast<std::uint32_t>(product >> kWordBits), static_cast<std::uint32_t>(product)};
}

PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const HiLo p0 = mulhilo(kPhiloxMultiplier0, c[0]);
  const HiLo p1 = mulhilo(kPhiloxMultiplier1, c[2]);
  return {p1.hi ^ c[1] ^ k[0], p1.lo, p0.hi ^ c[3] ^ k[1], p0.lo};
}

}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {  // the key advances between rounds, not before the first
      key[0] += kPhiloxWeyl0;
      key[1] += kPhiloxWeyl1;
    }
    counter = round(counter, key);
  }
  return counter;
}

}  // namespace flashlab::cpu

// Philox4x32-10 reproduces the published known-answer vectors of Random123 (the
// `kat_vectors` file of D. E. Shaw Research's distribution: counter words, key words,
// output words), so any other implementation that passes them draws the same bits.
#include "flashlab/cpu/philox.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace flashlab::cpu;

TEST_CASE("Philox4x32-10 matches Random123's known-answer vectors") {
  struct Kat {
    PhiloxCounter counter;
    PhiloxKey key;
    PhiloxCounter expected;
  };
  const Kat kats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& kat : kats) CHECK(philox4x32_10(kat.counter, kat.key) == kat.expected);
}

TEST_CASE("Philox4x32-10 gives unrelated words for neighbouring counters and keys") {
  // A counter-based generator is only useful if counters 0, 1, 2, ... (neighbouring
  // positions of the mask) do not give related outputs: no repeated word among many.
  constexpr std::uint32_t kCounters = 4096;
  std::set<std::uint32_t> seen;
  for (std::uint32_t c = 0; c < kCounters; ++c)
    for (std::uint32_t word : philox4x32_10({c, 0, 0, 0}, {1, 0})) seen.insert(word);
  // 16384 random 32-bit words collide with probability ~ 16384^2 / 2^33 = 3%: allow one.
  CHECK(seen.size() >= 4 * kCounters - 1);
  CHECK(philox4x32_10({0, 0, 0, 0}, {1, 0}) != philox4x32_10({0, 0, 0, 0}, {0, 1}));
}

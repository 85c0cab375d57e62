// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as
// 1, 2, 3", SC'11): a counter-based random number generator. It has no state to carry
// from one draw to the next: the output is a pure function of a 128-bit counter and a
// 64-bit key, so any thread can draw the number for any position directly, and a GPU
// kernel that computes the same function gets the same bits. That is what lets the
// dropout mask be regenerated in the backward pass instead of being stored.
#pragma once

#include "flashlab/cpu/philox_rule.hpp"

#include <array>
#include <cstdint>

namespace flashlab::cpu {

using PhiloxCounter = std::array<std::uint32_t, 4>;  // (c0, c1, c2, c3)
using PhiloxKey = std::array<std::uint32_t, 2>;      // (k0, k1)

// kPhiloxRounds rounds (philox_rule.hpp, with the constants). Each round multiplies two
// counter words by fixed odd constants, takes the high and low halves of the 64-bit
// products, and xors the high halves into the other two words together with the key; the
// key is bumped by a Weyl sequence between rounds.

// Four independent uniformly distributed 32-bit words for one (counter, key).
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// A 64-bit seed as the key's two words, low word first.
constexpr PhiloxKey philox_key(std::uint64_t seed) {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
}

}  // namespace flashlab::cpu

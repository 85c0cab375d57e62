// The numbers of flashlab's dropout rule, stated once for every executor: the constants of
// Philox4x32-10 (philox.hpp) and the way a weight's position fills its counter (dropout.hpp).
// Plain constexpr integers and no Eigen, so that the CUDA kernels (gpu/kernels/dropout.cuh)
// include this very header and draw the same bits as the CPU reference.
#pragma once

#include <cstdint>

namespace flashlab::cpu {

// Ten rounds, the count the paper recommends (seven already pass BigCrush; three more are
// a safety margin).
inline constexpr int kPhiloxRounds = 10;

// The round multipliers and the Weyl increments of the key (the golden ratio and
// sqrt(3) - 1, as 32-bit fractions), as published with the generator.
inline constexpr std::uint32_t kPhiloxMultiplier0 = 0xD2511F53;
inline constexpr std::uint32_t kPhiloxMultiplier1 = 0xCD9E8D57;
inline constexpr std::uint32_t kPhiloxWeyl0 = 0x9E3779B9;
inline constexpr std::uint32_t kPhiloxWeyl1 = 0xBB67AE85;

// The columns one Philox call covers: its four output words. Column c of a row uses word
// c % 4 of the call whose first counter word is c / 4.
inline constexpr std::int64_t kColumnsPerPhiloxCall = 4;
// batch and head share one 32-bit counter word, 16 bits each: batch * 2^16 + head.
inline constexpr int kHeadBits = 16;
inline constexpr std::int64_t kMaxBatchOrHead = std::int64_t{1} << kHeadBits;

// The counter word of (batch, head); both must lie in [0, 2^16).
constexpr std::uint32_t dropout_head_word(std::int64_t batch, std::int64_t head) {
  return static_cast<std::uint32_t>(batch * kMaxBatchOrHead + head);
}

// A Philox word below this value drops its weight: floor(p * 2^32), for p in [0, 1). p < 1
// makes p * 2^32 < 2^32, so it fits a 32-bit word; for p >= 0 truncation is the floor.
constexpr std::uint32_t dropout_threshold(double p) {
  constexpr double kTwoTo32 = 4294967296.0;  // 2^32: the number of values a Philox word takes
  return static_cast<std::uint32_t>(p * kTwoTo32);
}

// What a kept weight is multiplied by, 1/(1 - p), worked out in double: in fp32, 1 - p loses
// p's low digits (and is 0 for p > 1 - 2^-25). Callers round it to their own type once.
constexpr double dropout_keep_scale(double p) { return 1.0 / (1.0 - p); }

}  // namespace flashlab::cpu

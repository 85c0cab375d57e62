// The largest problem the simulator counts: every program, mirror and closed form takes
// these, so that its counts stay within 64 bits (4 N^2 d < 2^63 with room to spare).
#pragma once

#include "flashlab/cpu/types.hpp"

namespace flashlab::sim {

inline constexpr cpu::Index kMaxLength = cpu::Index{1} << 22;   // N, N_q, N_k: 4,194,304
inline constexpr cpu::Index kMaxHeadDim = cpu::Index{1} << 12;  // d: 4,096

}  // namespace flashlab::sim

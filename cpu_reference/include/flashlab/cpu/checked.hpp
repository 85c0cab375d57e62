// Sizes, strides and counts combined with overflow checks. Every product or sum of sizes in
// the CPU API and the simulator goes through these, so that a size near 2^63 is refused
// with a message instead of wrapping round to a small or negative number and giving a
// wrong answer silently.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <initializer_list>
#include <limits>
#include <string_view>

namespace flashlab::cpu {

// The largest size, stride or count that flashlab computes with: 2^63 - 1.
inline constexpr Index kMaxIndex = std::numeric_limits<Index>::max();

// a * b and a + b of non-negative sizes. Throws InvalidArgument, naming `what`, the operands
// and the limit, when either operand is negative or the result exceeds kMaxIndex.
Index checked_mul(Index a, Index b, std::string_view what);
Index checked_add(Index a, Index b, std::string_view what);

// The product of several sizes, e.g. checked_product({batch, heads, N, d}, "the entries of Q"),
// formed left to right; each partial product must fit as well.
Index checked_product(std::initializer_list<Index> sizes, std::string_view what);

// Throws InvalidArgument ("what = -3: ... must be at least 0") for a negative size.
void check_nonnegative(Index value, std::string_view what);

}  // namespace flashlab::cpu

// The rule flashlab judges a result by (ANCHORS.md; the FlashAttention repositories' own):
//
//   max |out - exact| <= factor x max |naive - exact|  (+ the fp32 slack below),
//
// factor 2 for O, 3 for the gradients, `naive` the plain three-operator attention (or its
// backward) in the same precision as `out`, `exact` the same in fp64. In fp32 the naive error is
// a handful of roundings and can be smaller than another summation order's by luck (a head
// whose rows see few keys; exactly 0 at N_k = 1, where factor x 0 allows nothing), so fp32
// results are also allowed the few roundings a different order of the same sum leaves:
// about sqrt(terms) of them, times the largest value summed, with a margin of
// kSummationOrderSlack (a margin, not a fit).
#pragma once

#include "flashlab/cpu/types.hpp"

#include <cmath>
#include <limits>

namespace flashlab::cpu {

inline constexpr double kOutputErrorFactor = 2.0;    // O against the naive forward's error
inline constexpr double kGradientErrorFactor = 3.0;  // dQ, dK, dV against the naive backward's
inline constexpr double kSummationOrderSlack = 8.0;

// kSummationOrderSlack fp32 epsilons per sqrt(terms), times `largest`: what summing `terms`
// values of magnitude up to `largest` in another order moves an fp32 result by, with margin.
inline double summation_order_slack(double terms, double largest) {
  return kSummationOrderSlack * double(std::numeric_limits<float>::epsilon()) * std::sqrt(terms) *
         largest;
}

}  // namespace flashlab::cpu

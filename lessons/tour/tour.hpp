// `flashlab tour`: the first thing a newcomer runs. Two stops:
//   1. the worked example (exponentials 1, 2, 4, 8 over V = 1, 2, 3, 4) traced tile by tile
//      through the online-softmax state, ending at exactly 49/15;
//   2. what the three-operator baseline stores and moves at N = 8192, d = 128 in bf16,
//      against what FlashAttention-2 writes instead: O and the O(N) log-sum-exp L (its
//      running m and l never leave the chip), as the simulator counts them.
#pragma once

#include <iosfwd>

namespace flashlab::app {

void run_tour(std::ostream& out);

}  // namespace flashlab::app

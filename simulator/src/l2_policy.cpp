// The L2 policies' names and their check (flashlab/sim/l2_policy.hpp).
#include "flashlab/sim/l2_policy.hpp"

#include "flashlab/cpu/types.hpp"

namespace flashlab::sim {

std::string_view to_string(L2Replacement replacement) {
  switch (replacement) {
    case L2Replacement::lru: return "lru";
    case L2Replacement::random: return "random";
    case L2Replacement::sets: return "sets";
  }
  return "unknown";
}

void check(L2Replacement replacement) {
  if (replacement != L2Replacement::lru && replacement != L2Replacement::random &&
      replacement != L2Replacement::sets)
    throw cpu::InvalidArgument("an unknown L2 replacement: give lru, random or sets");
}

}  // namespace flashlab::sim

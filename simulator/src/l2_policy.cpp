// The L2 policies' names and their check (flashlab/sim/l2_policy.hpp).
#include "flashlab/sim/l2_policy.hpp"

#include "flashlab/cpu/types.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace flashlab::sim {

std::string_view to_string(L2Replacement replacement) {
  switch (replacement) {
    case L2Replacement::lru: return "lru";
    case L2Replacement::random: return "random";
    case L2Replacement::sets: return "sets";
  }
  return "unknown";
}

std::optional<L2Replacement> parse_l2_replacement(std::string_view name) {
  for (const L2Replacement r : kL2Replacements)
    if (to_string(r) == name) return r;
  return std::nullopt;
}

std::vector<std::string> l2_replacement_names() {
  std::vector<std::string> names;
  for (const L2Replacement r : kL2Replacements) names.emplace_back(to_string(r));
  return names;
}

void check_l2_ways(int ways) {
  if (ways < 1 || ways > kMaxL2Ways)
    throw cpu::InvalidArgument(fmt::format(
        "an L2 of {} ways a set: give 1 to {} (a GPU's L2 has tens; kL2Ways = {} when no "
        "profile says)",
        ways, kMaxL2Ways, kL2Ways));
}

void check_l2_reduced_window(int window, int ways, L2Replacement replacement) {
  if (window < 1 || window > ways)
    throw cpu::InvalidArgument(fmt::format(
        "reduced lines kept among a set's {} least recently used: give 1 (plain LRU) to {}, "
        "the ways of a set",
        window, ways));
  if (window > 1 && replacement != L2Replacement::sets)
    throw cpu::InvalidArgument(fmt::format(
        "reduced lines kept among a set's {} least recently used under the {} policy: a set's "
        "lines are the sets policy's, give 1 or that policy",
        window, to_string(replacement)));
}

void check(L2Replacement replacement) {
  if (std::find(kL2Replacements.begin(), kL2Replacements.end(), replacement) ==
      kL2Replacements.end()) {
    const std::vector<std::string> names = l2_replacement_names();
    throw cpu::InvalidArgument(fmt::format("an unknown L2 replacement: give {} or {}",
                                           fmt::join(names.begin(), names.end() - 1, ", "),
                                           names.back()));
  }
}

}  // namespace flashlab::sim

// A step log's rows put into the logged blocks (sim::LoggedBlock::step_starts), for the programs
// that replay block logs with their step logs (scalar_l1_vs_block_log,
// backward_dram_vs_block_log): each row a step a block began, in any order.
#pragma once

#include "flashlab/sim/grid.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace flashlab::bench {

// A step no row gave (the logs' times are never negative).
inline constexpr double kNotLogged = -1.0;

// Block `block` began step `step` at `start`; the steps before it that no row has given yet
// stay kNotLogged.
inline void set_step_start(sim::LoggedBlock& block, std::size_t step, double start) {
  if (block.step_starts.size() <= step) block.step_starts.resize(step + 1, kNotLogged);
  block.step_starts[step] = start;
}

// The first block with a step missing before its last, or none.
inline std::optional<std::size_t> block_with_gap(const std::vector<sim::LoggedBlock>& blocks) {
  for (std::size_t b = 0; b < blocks.size(); ++b)
    if (std::ranges::find(blocks[b].step_starts, kNotLogged) != blocks[b].step_starts.end())
      return b;
  return std::nullopt;
}

}  // namespace flashlab::bench

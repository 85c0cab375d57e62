// Small grids for the grid model's tests (test_grid_l2.cpp, test_grid_drift.cpp): its L2
// events as text, to work a grid event by event, and random small grids, to check a property
// over many.
#pragma once

#include "flashlab/sim/grid.hpp"

#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

namespace flashlab::sim::test {

// The grid's tensors as its report and its events number them (L2Event::tensor).
enum GridTensor : int { kQ, kK, kV, kO, kL };
inline constexpr const char* kGridTensorNames[] = {"Q", "K", "V", "O", "L"};

// Each event as "kind tensor row0 bytes", e.g. "miss K 16 256".
inline std::vector<std::string> events_of(const GridProblem& p) {
  std::vector<std::string> out;
  run_grid(p, [&](const L2Event& e) {
    out.push_back(
        fmt::format("{} {} {} {}", to_string(e.kind), kGridTensorNames[e.tensor], e.row0, e.bytes));
  });
  return out;
}

// A small random grid: N from `lengths`, GQA groups, d, tiles, SMs, an L2 of a few tiles in
// 1 to 3 partitions, causal or not; the rest as GridProblem's defaults.
inline GridProblem random_small_grid(std::mt19937_64& rng, const std::vector<cpu::Index>& lengths) {
  std::uniform_int_distribution<cpu::Index> pick(0, 1 << 20);
  const cpu::Index N = lengths[static_cast<std::size_t>(pick(rng)) % lengths.size()];
  const cpu::Index kv_heads = 1 + pick(rng) % 3, group = 1 + pick(rng) % 3;
  return {.N = N,
          .d = 8 * (1 + pick(rng) % 4),
          .heads = kv_heads * group,
          .kv_heads = kv_heads,
          .causal = pick(rng) % 2 ? cpu::Causal::top_left : cpu::Causal::none,
          .Br = 8 * (1 + pick(rng) % 4),
          .Bc = 8 * (1 + pick(rng) % 4),
          .blocks_per_sm = 1 + pick(rng) % 2,
          .sm_count = 1 + pick(rng) % 5,
          .l2_bytes = 256 + pick(rng) % 16384,
          .l2_partitions = 1 + pick(rng) % 3};
}

}  // namespace flashlab::sim::test

// Small grids for the grid model's tests (test_grid_l2.cpp, test_grid_drift.cpp,
// test_grid_backward.cpp): its L2 events as text, to work a grid event by event, random small
// grids, to check a property over many, and the property that grouping keeps every count.
#pragma once

#include "flashlab/sim/grid.hpp"

#include <doctest/doctest.h>
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

// A small random grid: N from `lengths`, and N_q as many (half the time) or another of
// them, GQA groups, d, tiles, SMs, an L2 of a few tiles in 1 to 3 partitions, causal (either
// alignment) or not; the rest as GridProblem's defaults.
inline GridProblem random_small_grid(std::mt19937_64& rng, const std::vector<cpu::Index>& lengths) {
  std::uniform_int_distribution<cpu::Index> pick(0, 1 << 20);
  const auto length = [&] { return lengths[static_cast<std::size_t>(pick(rng)) % lengths.size()]; };
  const cpu::Index N = length(), N_q = pick(rng) % 2 ? 0 : length();
  const cpu::Index kv_heads = 1 + pick(rng) % 3, group = 1 + pick(rng) % 3;
  constexpr cpu::Causal kMasks[] = {cpu::Causal::none, cpu::Causal::top_left,
                                    cpu::Causal::bottom_right};
  return {.N = N,
          .N_q = N_q,
          .d = 8 * (1 + pick(rng) % 4),
          .heads = kv_heads * group,
          .kv_heads = kv_heads,
          .causal = kMasks[pick(rng) % 3],
          .Br = 8 * (1 + pick(rng) % 4),
          .Bc = 8 * (1 + pick(rng) % 4),
          .blocks_per_sm = 1 + pick(rng) % 2,
          .sm_count = 1 + pick(rng) % 5,
          .l2_bytes = 256 + pick(rng) % 16384,
          .l2_partitions = 1 + pick(rng) % 3};
}

// The problem run with blocks that run alike booked as one group (no observer) and block by
// block (an observer): every count the same, in no more L2 accesses.
inline void check_grouping_changes_no_count(const GridProblem& p) {
  const GridReport grouped = run_grid(p);
  const GridReport alone = run_grid(p, [](const L2Event&) {});
  REQUIRE(grouped.tensors.size() == alone.tensors.size());
  for (std::size_t t = 0; t < grouped.tensors.size(); ++t) {
    CAPTURE(grouped.tensors[t].name);
    CHECK(grouped.tensors[t].read == alone.tensors[t].read);
    CHECK(grouped.tensors[t].written == alone.tensors[t].written);
    CHECK(grouped.tensors[t].dram_read == alone.tensors[t].dram_read);
    CHECK(grouped.tensors[t].dram_written == alone.tensors[t].dram_written);
    CHECK(grouped.dirty_at_end[t] == alone.dirty_at_end[t]);
  }
  CHECK(grouped.steps == alone.steps);
  CHECK(grouped.l2_accesses <= alone.l2_accesses);
}

}  // namespace flashlab::sim::test

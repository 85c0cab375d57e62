// The grid model's L2 events as text, for tests that work a small grid event by event
// (test_grid_l2.cpp, test_grid_drift.cpp).
#pragma once

#include "flashlab/sim/grid.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace flashlab::sim::test {

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

}  // namespace flashlab::sim::test

// The Hopper kernel's ablation as measured on the H200: the one place the lesson reads it
// from. Run of 2026-12-01 (bench/gpu/NOTES.md, "fa3 v1, after the tensor-map fix"; the
// command: bench/gpu/run_device.sh ablation, i.e. bench.py --ablation): bf16, d = 128,
// N = 8192, B = 2, H = 16, non-causal; triton.testing.do_bench medians, TFLOP/s counted as
// 4 B H N^2 d per call.
#pragma once

#include "timeline.hpp"

#include <array>
#include <string_view>

namespace flashlab::app::timeline {

struct MeasuredShape {
  Index N, d, batch, heads;
  std::string_view date, source;
};
inline constexpr MeasuredShape kMeasuredShape{
    8192, 128, 2, 16, "2026-12-01", "bench/gpu/NOTES.md (bench.py --ablation)"};

struct MeasuredRun {
  std::string_view name;  // what moved away from the default
  Switches switches;
  double tflops;
};

inline constexpr std::array kMeasuredAblation = {
    MeasuredRun{"default", {true, 2, true, true}, 248.5},
    MeasuredRun{"1 stage", {true, 1, true, true}, 208.6},
    MeasuredRun{"3 stages", {true, 3, true, true}, 250.1},
    MeasuredRun{"no warp specialisation", {false, 2, true, true}, 225.0},
    MeasuredRun{"no ping-pong", {true, 2, false, true}, 249.6},
    MeasuredRun{"no intra-warpgroup overlap", {true, 2, true, false}, 240.9},
    MeasuredRun{"everything off", {false, 1, false, false}, 208.5},
};

}  // namespace flashlab::app::timeline

// The Hopper kernel's ablation as measured on the H200: the one place the lesson reads it
// from. Run of 2026-12-01, third (bench/gpu/NOTES.md, "fa3 v2"; the rows are those of
// bench/results/2026-12-01-h200-fa3v2-ablation.csv with causal = 0, written by
// bench/gpu/run_device.sh ablation, i.e. bench.py --ablation): bf16, d = 128, N = 8192,
// B = 2, H = 16, non-causal; triton.testing.do_bench medians, TFLOP/s counted as
// 4 B H N^2 d per call. cuDNN in the same run: 653.0.
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
    8192, 128, 2, 16, "2026-12-01",
    "bench/results/2026-12-01-h200-fa3v2-ablation.csv (bench.py --ablation)"};

struct MeasuredRun {
  std::string_view name;  // what moved away from the default
  Switches switches;
  double tflops;
};

inline constexpr std::array kMeasuredAblation = {
    MeasuredRun{"default", {true, 2, true, true}, 574.5},
    MeasuredRun{"1 stage", {true, 1, true, true}, 454.3},
    MeasuredRun{"3 stages", {true, 3, true, true}, 568.4},
    MeasuredRun{"no warp specialisation", {false, 2, true, true}, 496.7},
    MeasuredRun{"no ping-pong", {true, 2, false, true}, 551.3},
    MeasuredRun{"no intra-warpgroup overlap", {true, 2, true, false}, 517.9},
    MeasuredRun{"everything off", {false, 1, false, false}, 387.1},
};

}  // namespace flashlab::app::timeline

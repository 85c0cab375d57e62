// The Hopper kernel's ablation as measured on the H200: the one place the lesson reads it
// from. Run of 2026-12-07 (bench/gpu/NOTES.md, "The H200 again"; the rows are those of
// bench/results/2026-12-07-h200-fa3-ablation-d128.csv with causal = 0 and the options the
// switches leave at the default's, written by bench.py --ablation, which a test compares with
// this file): bf16, d = 128, N = 8192, B = 2, H = 16, non-causal; triton.testing.do_bench
// medians, TFLOP/s counted as 4 B H N^2 d per call. cuDNN in the same run: 618.3. (The
// lesson's first table, fa3 v2 of 2026-12-01, is bench/results/2026-12-01-h200-fa3v2-
// ablation.csv: default 574.5, no ping-pong 551.3, no intra-warpgroup overlap 517.9.)
#pragma once

#include "timeline.hpp"

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

namespace flashlab::app::timeline {

struct MeasuredShape {
  Index N, d, batch, heads;
  std::string_view date;
  std::string_view csv;  // in bench/results/, written by bench.py --ablation
};
inline constexpr MeasuredShape kMeasuredShape{
    8192, 128, 2, 16, "2026-12-07", "2026-12-07-h200-fa3-ablation-d128.csv"};

struct MeasuredRun {
  std::string_view name;  // what moved away from the default
  Switches switches;
  double tflops;
};

inline constexpr std::array kMeasuredAblation = {
    MeasuredRun{"default", {true, 2, true, true}, 646.0},
    MeasuredRun{"1 stage", {true, 1, true, true}, 400.4},
    MeasuredRun{"3 stages", {true, 3, true, true}, 644.9},
    MeasuredRun{"no warp specialisation", {false, 2, true, true}, 486.5},
    MeasuredRun{"no ping-pong", {true, 2, false, true}, 649.6},
    MeasuredRun{"no intra-warpgroup overlap", {true, 2, true, false}, 590.9},
    MeasuredRun{"everything off", {false, 1, false, false}, 349.5},
};

// The measured run named `name` (kMeasuredAblation's first is the default); a name the table
// lacks is the caller's mistake.
inline const MeasuredRun& measured_run(std::string_view name) {
  for (const auto& run : kMeasuredAblation)
    if (run.name == name) return run;
  throw std::logic_error("lesson 8: no measured run named " + std::string(name));
}
// What an idea buys on the H200: the default's measured speed over the run `name`'s.
inline double measured_gain(std::string_view name) {
  return kMeasuredAblation[0].tflops / measured_run(name).tflops;
}

}  // namespace flashlab::app::timeline

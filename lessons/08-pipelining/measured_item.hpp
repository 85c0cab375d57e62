// One work item of the Hopper kernel as its pipeline log measured it on the H200: the one
// place the lesson reads it from. Runs of 2026-12-04, sixth and eighth (bench/RESULTS.md; the
// rows are those of the phases CSVs in bench/results named below, written by
// bench/gpu/pipeline_log.py from bench_pipeline_log's logs, which a test compares with this
// file): bf16, d = 128, non-causal, the default options, B = 16384 / N, H = 16, every block of
// the persistent grid logged; medians over the consumers' items, in ns. The log's stamps
// slow the kernel (a section here is 2.1 us, against 1.7 us unlogged), so the phases are read
// against the log's own section, not against the kernel's speed.
#pragma once

#include <array>
#include <string_view>

namespace flashlab::app::timeline {

// A consumer's item, from the moment it has the item to the moment it has the next, in the
// phases of bench/gpu/pipeline_log.py.
struct MeasuredItem {
  std::string_view phases;  // the phases CSV in bench/results/ that holds the row
  std::string_view log;     // the row's log (its "log" column)
  std::string_view what;
  int N;                       // keys: an item has N / Bc KV tiles
  double section_ns, item_ns;  // a mainloop section (median of the middle ones); the item
  double start_ns;             // item -> S_0 issued: Q, K_0 and the ping-pong turn awaited
  double s0_ns;                // S_0's latency
  double softmax0_ns;          // S_0's softmax, no product under it
  double last_wait_ns;         // the last V and the turn awaited
  double last_pv_ns;           // the last U += W V's latency
  double o_ns;                 // O = U / l, LSE, the TMA store issued
  double next_ns;              // O written -> the next item in hand
};

inline constexpr std::string_view kMeasuredItemSource =
    "bench/results/2026-12-04-h200-fa3-pipeline-phases*.csv (bench_pipeline_log, pipeline_log.py)";

inline constexpr std::string_view kPhases = "2026-12-04-h200-fa3-pipeline-phases.csv";
inline constexpr std::array kMeasuredItems = {
    MeasuredItem{kPhases, "2026-12-04-h200-fa3-pipeline-log-d128-n8192.csv", "N = 8192", 8192,
                 2084.5, 135646.0, 768.4, 255.0, 781.6, 829.9, 236.5, 1014.0, 631.4},
    MeasuredItem{kPhases, "2026-12-04-h200-fa3-pipeline-log-d128-n1024.csv", "N = 1024", 1024,
                 2165.0, 19507.9, 783.5, 265.8, 826.0, 843.6, 249.2, 1028.0, 638.9},
    MeasuredItem{kPhases, "2026-12-04-h200-fa3-pipeline-log-d128-n1024-item-slots.csv",
                 "N = 1024, items in the Q slots", 1024, 2093.9, 18898.2, 760.0, 263.8, 817.9,
                 798.6, 242.5, 1045.6, 248.2},
    MeasuredItem{"2026-12-04-h200-fa3-pipeline-phases-o-split.csv", "pipeline-log-d128-n1024.csv",
                 "N = 1024, the turn handed over early", 1024, 2129.0, 19217.5, 627.8, 262.1, 805.0,
                 822.4, 251.5, 1233.1, 237.9},
};

// The same change timed without the log, in turns with the kernel before it (bench.py
// --baseline-lib; bench/results/2026-12-04-h200-fa3-item-slots.csv and -repeat.csv): the new
// kernel's speed over the old at N = 1024, d = 128, non-causal, in the two runs.
inline constexpr std::array kItemSlotsSpeedUp = {1.037, 1.034};
// The next change, the last consumer handing consumer 0 the ping-pong turn as soon as it has
// issued its last U += W V rather than after its O, timed the same way in three runs
// (-fa3-early-hand-over.csv, -repeat.csv, -on-stmatrix.csv).
inline constexpr std::array kEarlyHandOverSpeedUp = {1.0164, 1.0002, 1.0114};

// A mainloop section of the kernel without the log, for the log's own beside it: at
// N = 16384, d = 128, non-causal (128 KV tiles an item, 16 items on the busiest SM), 635.5
// TFLOP/s is 216 us an item, 1.69 us a tile (bench/gpu/NOTES.md, "d = 128 at N = 1024 without
// the mask").
inline constexpr double kUnloggedSectionNs = 1690;

}  // namespace flashlab::app::timeline

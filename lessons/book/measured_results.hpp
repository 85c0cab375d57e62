// What was measured on a GPU, read for the book's figures from the files the benchmarks
// wrote into bench/results/ (the one place those numbers live; bench/RESULTS.md discusses
// them). A missing file is no error: the figures then show the model alone and say so.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace flashlab::app::book {

struct MeasuredPoint {
  std::string kernel;  // "fa2", "naive", ...
  cpu::Index N = 0, d = 0, heads = 1;
  bool causal = false;
  double value = 0;  // bytes, or TFLOP/s
};

struct MeasuredResults {
  std::string bytes_file,
      speed_file;  // the files read, relative to the repository; empty if absent
  std::vector<MeasuredPoint> sm_read;  // bytes read into the SMs (Nsight Compute), one head
  std::vector<MeasuredPoint> tflops;   // forward TFLOP/s (CUDA-event medians)
};

// The files' names, relative to the repository's root.
inline constexpr std::string_view kMeasuredBytesFile =
    "bench/results/2026-12-01-h200-compare-sweep-h1.csv";
inline constexpr std::string_view kMeasuredSpeedFile =
    "bench/results/2026-12-01-h200-forward-speed.csv";

// Reads both from the repository at root. Throws cpu::InvalidArgument naming the file, the
// line and what was expected when a file exists but cannot be parsed.
MeasuredResults read_measured_results(const std::filesystem::path& root);

// The points of one kernel with d and causal as given, in increasing N.
std::vector<MeasuredPoint> select(const std::vector<MeasuredPoint>& points, std::string_view kernel,
                                  cpu::Index d, bool causal);

}  // namespace flashlab::app::book

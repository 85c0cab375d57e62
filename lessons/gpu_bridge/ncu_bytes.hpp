// HBM bytes measured by Nsight Compute: runs a command under `ncu` and sums the DRAM and L2
// byte counters of every kernel it launched.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace flashlab::app {

struct MeasuredBytes {
  double dram_read = 0, dram_written = 0, l2 = 0;  // dram__bytes_read/write.sum, lts__t_bytes.sum
  int kernels = 0;                                 // kernels profiled
};

// The path of ncu when it is on PATH or in /usr/local/cuda/bin, else nothing.
std::optional<std::string> find_ncu();

struct NcuOutcome {
  std::optional<MeasuredBytes> bytes;
  std::string message;  // why there are no bytes
};

// Runs `ncu --csv --metrics ... <command...>` (no shell: each word is one argument) and sums
// the metrics over every kernel.
NcuOutcome measure_with_ncu(const std::string& ncu, const std::vector<std::string>& command);

// The sum of the three metrics in ncu's --csv output (exposed for testing the parser).
std::optional<MeasuredBytes> parse_ncu_csv(const std::string& csv);

}  // namespace flashlab::app

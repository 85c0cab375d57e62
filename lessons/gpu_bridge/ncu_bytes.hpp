// Bytes measured by Nsight Compute at the three levels a kernel's traffic crosses: runs a
// command under `ncu` and sums, over every kernel it launched,
//   into and out of the SMs  l1tex__m_xbar2l1tex_read_bytes.sum,
//   l1tex__m_l1tex2xbar_write_bytes.sum
//                            (what the simulator's two-level model counts: every load and
//                            store of a tile between the L2 and an SM)
//   at the L2 slices         lts__t_bytes.sum (lower: Hopper merges simultaneous requests of
//                            several SMs for the same sectors before they reach the slices)
//   at DRAM                  dram__bytes_read.sum, dram__bytes_write.sum (past the L2)
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace flashlab::app {

struct MeasuredBytes {
  double sm_read = 0, sm_written = 0;  // into and out of the SMs
  double l2 = 0;                       // at the L2 slices
  double dram_read = 0, dram_written = 0;
  int kernels = 0;  // kernels profiled
};

// The metrics, each once: ncu's name and the field it is summed into.
struct NcuMetric {
  const char* name;
  double MeasuredBytes::*field;
};
inline constexpr NcuMetric kNcuMetrics[] = {
    {"l1tex__m_xbar2l1tex_read_bytes.sum", &MeasuredBytes::sm_read},
    {"l1tex__m_l1tex2xbar_write_bytes.sum", &MeasuredBytes::sm_written},
    {"lts__t_bytes.sum", &MeasuredBytes::l2},
    {"dram__bytes_read.sum", &MeasuredBytes::dram_read},
    {"dram__bytes_write.sum", &MeasuredBytes::dram_written},
};

// The path of ncu when it is on PATH or in /usr/local/cuda/bin, else nothing.
std::optional<std::string> find_ncu();

struct NcuOutcome {
  std::optional<MeasuredBytes> bytes;
  std::string message;  // why there are no bytes
};

// Runs `ncu --csv --metrics ... <ncu_options...> <command...>` (no shell: each word is one
// argument) and sums the metrics over every kernel it profiled (ncu_options may narrow them,
// e.g. {"--kernel-name", "regex:..."}).
NcuOutcome measure_with_ncu(const std::string& ncu, const std::vector<std::string>& command,
                            const std::vector<std::string>& ncu_options = {});

// The sum of each metric in ncu's --csv output (exposed for testing the parser).
std::optional<MeasuredBytes> parse_ncu_csv(const std::string& csv);

}  // namespace flashlab::app

// Bytes measured by Nsight Compute at the levels a kernel's traffic crosses: runs a command
// under `ncu` and sums, over every kernel it launched,
//   into the SMs             l1tex__m_xbar2l1tex_read_bytes.sum
//   stores the L1 issued     l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum and _op_red.sum,
//                            32-byte sectors, each warp instruction's own (what the mirrors'
//                            "written" counts: exact, docs/IO-LEVELS.md)
//   out of the SMs           l1tex__m_l1tex2xbar_write_bytes.sum (those sectors or fewer:
//                            some kernels' stores to one sector are merged after the L1's
//                            store pipe, by a rule the mirrors do not model)
//   at the L2 slices         lts__t_bytes.sum (lower: Hopper's L2 Request Coalescer merges
//                            requests of several SMs for the same sectors before the slices)
//   the Coalescer's reads    lrc__xbar2gpc_sectors_op_read.sum (sent to the SMs: what they
//                            read) and lrc__lts2lrc_sectors_op_read.sum (asked of the slices),
//                            whose ratio is how many SMs' reads each slice read served
//                            (docs/IO-LEVELS.md, "What the L2 slices count")
//   at DRAM                  dram__bytes_read.sum, dram__bytes_write.sum (past the L2)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app {

struct MeasuredBytes {
  double sm_read = 0;        // into the SMs
  double stores_issued = 0;  // the store and reduction sectors the L1 issued, in bytes
  double sm_written = 0;     // out of the SMs
  double l2 = 0;             // at the L2 slices
  double lrc_to_sms = 0;       // read sectors the L2 Request Coalescer sent to the SMs, in bytes
  double lrc_from_slices = 0;  // read sectors it asked of the L2 slices, in bytes
  double dram_read = 0, dram_written = 0;
  int kernels = 0;  // kernels profiled

  // Bytes out of the SMs per byte of store sectors issued: 1 where nothing was merged, 0.5
  // where every two sectors left as one; nothing when no stores were counted.
  std::optional<double> merge_ratio() const;
  // Sectors sent to the SMs per sector read from the slices: 1 where no two SMs' reads met
  // in the Coalescer, 2 where each slice read served two; nothing when it was not counted.
  std::optional<double> coalescing() const;
};

// What ncu counts a metric in: bytes ("byte", "Kbyte", ...) or sectors ("sector", ...), which
// the parser turns into bytes of 32-byte sectors.
enum class NcuUnit { bytes, sectors };

// The metrics, each once: ncu's name, its unit, the field it is summed into and the level of
// the memory system it measures.
struct NcuMetric {
  const char* name;
  NcuUnit unit;
  double MeasuredBytes::*field;
  const char* level;
};
inline constexpr NcuMetric kNcuMetrics[] = {
    {"l1tex__m_xbar2l1tex_read_bytes.sum", NcuUnit::bytes, &MeasuredBytes::sm_read, "into the SMs"},
    {"l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", NcuUnit::sectors,
     &MeasuredBytes::stores_issued, "store sectors the L1 issued"},
    {"l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum", NcuUnit::sectors,
     &MeasuredBytes::stores_issued, "reduction sectors the L1 issued"},
    {"l1tex__m_l1tex2xbar_write_bytes.sum", NcuUnit::bytes, &MeasuredBytes::sm_written,
     "out of the SMs"},
    {"lts__t_bytes.sum", NcuUnit::bytes, &MeasuredBytes::l2, "at the L2 slices"},
    {"lrc__xbar2gpc_sectors_op_read.sum", NcuUnit::sectors, &MeasuredBytes::lrc_to_sms,
     "read sectors the L2 Request Coalescer sent to the SMs"},
    {"lrc__lts2lrc_sectors_op_read.sum", NcuUnit::sectors, &MeasuredBytes::lrc_from_slices,
     "read sectors the Coalescer asked of the L2 slices"},
    {"dram__bytes_read.sum", NcuUnit::bytes, &MeasuredBytes::dram_read, "read from DRAM"},
    {"dram__bytes_write.sum", NcuUnit::bytes, &MeasuredBytes::dram_written, "written to DRAM"},
};

// One line a metric, "  <level>: <name>", for the tables that show them.
std::string ncu_levels_text();

// The path of ncu when it is on PATH or in /usr/local/cuda/bin, else nothing.
std::optional<std::string> find_ncu();

struct NcuOutcome {
  std::optional<MeasuredBytes> bytes;
  std::string message;  // why there are no bytes
};

// Nsight Compute charges DRAM writes that are not the kernel's to the kernels it measures
// (docs/IO-LEVELS.md, "Nsight Compute's first kernel, and its kernel replay"). The first
// kernel it profiles in a process is charged about 2.3 MiB where it reads more than the L2
// holds. So a command measured here first runs a kernel of its own that reads twice the L2
// (gpu_runner.hpp, run_ncu_first_kernel) and the sums leave out: that many kernels.
inline constexpr int kNcuFirstKernels = 1;

// In kernel replay (Nsight Compute's default: the kernel alone is run again for each pass the
// metrics need, its memory restored in between) every kernel that reads more than the L2 is
// charged about 2.3 MiB, the first kernel's too, and the first kernel takes nothing off the
// ones after it. Application replay runs the whole command once a pass, each run a fresh
// process whose first kernel takes them.
inline constexpr const char* kNcuReplayMode = "application";

// The clocks the GPU runs at while Nsight Compute measures (its --clock-control): the card's
// own (none: the boost any program gets; the default) or Nsight Compute's base clock (base:
// locked there, ncu's own default). fa2 and fa3 at one head past the L2 read within 3% of
// each other at the two; the GQA backward does not: on an H100 its main kernel at 16 / 2, N = 10,240 reads 2.26 to 2.37 GB at
// its own clocks and 2.95 to 3.09 at the base clock, its blocks keeping step only at the latter
// (docs/IO-LEVELS.md, "The backward's blocks logged"). `flashlab compare --ncu-clocks` sets it.
enum class NcuClocks { own, base };
void set_ncu_clocks(NcuClocks clocks);
NcuClocks ncu_clocks();
// ncu's --clock-control value for `clocks` ("none", "base"), and the words the reports use.
const char* ncu_clock_control(NcuClocks clocks);
const char* describe(NcuClocks clocks);
// "own" or "base" (compare's option), or nothing.
std::optional<NcuClocks> parse_ncu_clocks(std::string_view text);

// Runs `ncu --csv --metrics ... <command...>` (no shell: each word is one argument), at the
// clocks set_ncu_clocks chose, and sums the metrics over the kernels the command measures.
// The command runs run_ncu_first_kernel first (kNcuFirstKernels, above), then `setup_kernels`
// kernels that make its inputs (the backward's forward), then what is measured: the sums
// leave out the first two.
NcuOutcome measure_with_ncu(const std::string& ncu, const std::vector<std::string>& command,
                            int setup_kernels = 0);

// The sum of each metric in ncu's --csv output over its kernels but the first `skip_kernels`
// (in the order ncu lists them), in bytes (exposed for testing the parser); nothing when
// there is no header, a metric's unit is not its kind's, or no kernel is left.
std::optional<MeasuredBytes> parse_ncu_csv(const std::string& csv, int skip_kernels = 0);

}  // namespace flashlab::app

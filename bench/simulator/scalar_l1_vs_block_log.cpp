// The scalar kernel's reads into the SMs beside a block log, with plain loads (the library's
// until 2026-12-05, bench_scalar_block_log's build since), whose K and V pass the L1: on the
// H200 a build of the kernel that logs each block's SM (%smid) and its start and end (%globaltimer)
// ran under Nsight Compute, so every logged call has its own l1tex__m_xbar2l1tex_read_bytes
// (bench/gpu/NOTES.md, "The scalar kernel at 16 heads"). This program reads the logs and the bytes
// of two builds: the first's (*-scalar-block-log-ncu.csv: N, d, dtype, heads, call, and per block
// its SM, start and end; *-scalar-block-log-ncu-bytes.csv: the profiled launches in order, for each
// N a warm-up and then the logged calls) and bench_scalar_block_log's under block_log.py
// (*-scalar-block-log.csv, the same columns and causal; *-scalar-block-log-bytes.csv, a row a
// logged call with its sm_read_bytes), and predicts each call twice through the kernel's mirror
// (lessons/gpu_bridge/kernels.cpp, app::predict, with plain_loads): with the grid model's own
// schedule (the heads' blocks catching up with each other, sim::GridSchedule::catch_up, the median
// of its draws) and with the log replayed (sim::GridSchedule::logged: each block on its logged SM,
// its K and V tiles at an even pace between its start and end, or when it began each step where a
// step log is beside the log (block_log.py --steps), through that SM's L1).
// docs/IO-LEVELS.md, "The L1: plain loads", reads the table. Then, from the same logs, the
// figure catch_up takes: how far behind its head's first block a block started and still
// ended with its head (measured::kScalarL2StepShare).
//
//   ./build/bench/simulator/scalar_l1_vs_block_log
//   ./build/bench/simulator/scalar_l1_vs_block_log --n 4096
#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "measured_csvs.hpp"
#include "step_logs.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace flashlab;

namespace {

constexpr double kGoal = 0.02;  // bytes into the SMs within 2% for flashlab's own kernels
constexpr const char* kMetric = "l1tex__m_xbar2l1tex_read_bytes.sum";

struct Call {
  cpu::Index N = 0, d = 0, heads = 0, call = 0;
  std::string dtype;
  std::vector<sim::LoggedBlock> blocks;  // in block order
  std::vector<cpu::Index> head_of;       // each block's head
  bool causal = false;
  double measured = 0;                   // bytes into the SMs
};

// A head's blocks "end together" where each ended within this much of the head's last end (in
// the logs' ns); at N = 8192 whole heads of 128 blocks end within 20 us.
constexpr double kTogetherNs = 60e3;

// The head of one call whose blocks that ended together had started furthest apart, as a
// share of the head's span (its first such block's start to its last end).
struct WidestCatchUp {
  cpu::Index head = -1, blocks = 0;
  double share = 0;
};
WidestCatchUp widest_catch_up(const Call& c) {
  std::map<cpu::Index, std::vector<sim::LoggedBlock>> heads;
  for (std::size_t b = 0; b < c.blocks.size(); ++b) heads[c.head_of[b]].push_back(c.blocks[b]);
  WidestCatchUp widest;
  for (const auto& [head, blocks] : heads) {
    double last_end = 0;
    for (const auto& b : blocks) last_end = std::max(last_end, b.end);
    double first = last_end, last = 0;
    cpu::Index together = 0;
    for (const auto& b : blocks) {
      if (last_end - b.end > kTogetherNs) continue;
      first = std::min(first, b.start), last = std::max(last, b.start), ++together;
    }
    const double share = last_end > first ? (last - first) / (last_end - first) : 0;
    if (share > widest.share) widest = {head, together, share};
  }
  return widest;
}

using bench::CsvRows;

// The logged calls of one log (bench_scalar_block_log's rows, or the older build's without
// the causal column), in (N, causal, call) order, their bytes not yet read.
using CallKey = std::tuple<cpu::Index, bool, cpu::Index>;
std::map<CallKey, Call> read_blocks(const std::filesystem::path& log) {
  std::map<CallKey, Call> calls;
  CsvRows rows(log);
  const std::size_t N = rows.column("N"), d = rows.column("d"), dtype = rows.column("dtype"),
                    heads = rows.column("heads"), call = rows.column("call"),
                    block = rows.column("block"), head = rows.column("head"),
                    sm = rows.column("sm"), start = rows.column("start_ns"),
                    end = rows.column("end_ns");
  const auto causal_at = rows.find("causal");  // absent in the older build's logs
  for (std::vector<std::string> f; rows.next(f);) {
    const bool causal = causal_at && f[*causal_at] == "1";
    Call& c = calls[{std::stoll(f[N]), causal, std::stoll(f[call])}];
    c.N = std::stoll(f[N]), c.d = std::stoll(f[d]), c.heads = std::stoll(f[heads]);
    c.call = std::stoll(f[call]), c.dtype = f[dtype], c.causal = causal;
    const auto b = std::size_t(std::stoll(f[block]));
    if (c.blocks.size() <= b) c.blocks.resize(b + 1), c.head_of.resize(b + 1);
    c.blocks[b] = {std::stoll(f[sm]), std::stod(f[start]), std::stod(f[end])};
    c.head_of[b] = std::stoll(f[head]);
  }
  return calls;
}

// The older build's bytes (*-scalar-block-log-ncu-bytes.csv): Nsight Compute's rows of every
// profiled launch in order, for each N a warm-up and then the logged calls.
std::vector<Call> with_launch_bytes(std::map<CallKey, Call> calls, const std::filesystem::path& log,
                                    const std::filesystem::path& bytes) {
  std::vector<double> launches;  // the metric of each profiled launch, in order
  CsvRows rows(bytes);
  const std::size_t metric = rows.column("metric"), value = rows.column("value");
  for (std::vector<std::string> f; rows.next(f);)
    if (f[metric] == kMetric) launches.push_back(std::stod(f[value]));
  std::vector<Call> out;
  std::size_t at = 0;
  cpu::Index last_n = -1;
  for (auto& [key, c] : calls) {
    if (std::get<0>(key) != last_n) ++at, last_n = std::get<0>(key);  // that N's warm-up
    if (at >= launches.size())
      throw std::runtime_error(bytes.string() + ": fewer launches than " + log.string() +
                               " has calls (a warm-up and the logged calls at each N)");
    c.measured = launches[at++];
    out.push_back(std::move(c));
  }
  if (at != launches.size())
    throw std::runtime_error(bytes.string() + ": more launches than " + log.string() + " implies");
  return out;
}

// block_log.py's bytes (*-scalar-block-log-bytes.csv): a row a logged call, heads, N, causal,
// call and its sm_read_bytes.
std::vector<Call> with_call_bytes(std::map<CallKey, Call> calls, const std::filesystem::path& log,
                                  const std::filesystem::path& bytes) {
  CsvRows rows(bytes);
  const std::size_t N = rows.column("N"), causal = rows.column("causal"),
                    call = rows.column("call"), read = rows.column("sm_read_bytes");
  for (std::vector<std::string> f; rows.next(f);) {
    const auto it = calls.find({std::stoll(f[N]), f[causal] == "1", std::stoll(f[call])});
    if (it == calls.end())
      throw std::runtime_error(bytes.string() + ": a call " + log.string() + " did not log");
    it->second.measured = std::stod(f[read]);
  }
  std::vector<Call> out;
  for (auto& [key, c] : calls) {
    if (c.measured == 0)
      throw std::runtime_error(bytes.string() + ": no bytes for a call of " + log.string());
    out.push_back(std::move(c));
  }
  return out;
}

// A step log beside block_log.py's log (*-scalar-block-log-steps.csv, bench_scalar_block_log
// --steps-csv): N, heads, causal, call, block, step, start_ns, a row a step a block began.
// Puts each block's step starts into its call's log, for the replay to take each step when
// the block began it (sim::LoggedBlock::step_starts).
void with_step_starts(std::map<CallKey, Call>& calls, const std::filesystem::path& steps) {
  CsvRows rows(steps);
  const std::size_t N = rows.column("N"), causal = rows.column("causal"),
                    call = rows.column("call"), block = rows.column("block"),
                    step = rows.column("step"), start = rows.column("start_ns");
  for (std::vector<std::string> f; rows.next(f);) {
    const auto it = calls.find({std::stoll(f[N]), f[causal] == "1", std::stoll(f[call])});
    const auto b = std::size_t(std::stoll(f[block])), j = std::size_t(std::stoll(f[step]));
    if (it == calls.end() || b >= it->second.blocks.size())
      throw std::runtime_error(steps.string() + ": a step of a block the log beside it lacks");
    bench::set_step_start(it->second.blocks[b], j, std::stod(f[start]));
  }
  for (const auto& [key, c] : calls)
    if (const auto b = bench::block_with_gap(c.blocks))
      throw std::runtime_error(steps.string() + ": block " + std::to_string(*b) +
                               " of a call has a step missing before its last");
}

// The SMs' reads of one call, as the mirror predicts them with or without its log.
double sm_read(const Call& c, bool replay_log) {
  app::KernelRun run{.kernel = "scalar",
                     .n = c.N,
                     .d = c.d,
                     .heads = c.heads,
                     .dtype = c.dtype,
                     .causal = c.causal,
                     .plain_loads = true};  // bench_scalar_block_log's build
  if (replay_log) run.block_log = c.blocks;
  const app::Prediction p = app::predict(run);
  if (!p.grid) throw std::runtime_error("the scalar kernel's mirror ran no grid: " + p.why_not);
  return p.sm_read();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The scalar kernel's reads into the SMs: the grid model's schedule and the "
      "logged blocks replayed, beside the bytes of the same calls"};
  std::string results = "bench/results";
  cpu::Index n_only = 0;
  app.add_option("--results", results, "the folder of measured CSVs")->capture_default_str();
  app.add_option("--n", n_only, "only the calls of this N (0: all)")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    // Two builds' files: the older (logs *-scalar-block-log-ncu.csv, Nsight Compute's rows
    // beside them) and block_log.py's (*-scalar-block-log.csv, a row of bytes a call).
    struct Kind {
      std::string log, bytes;
      bool per_call;
    };
    const Kind kinds[] = {{"-scalar-block-log-ncu.csv", "-scalar-block-log-ncu-bytes.csv", false},
                          {"scalar-block-log.csv", "scalar-block-log-bytes.csv", true}};
    int rows = 0, within_model = 0, within_log = 0;
    std::vector<std::pair<std::string, Call>> calls;  // for the catch-up table below
    fmt::print(
        "| log | N | heads | causal | call | measured GB | model GB | meas / model | replayed GB | "
        "meas / replayed | step log |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Kind& kind : kinds) {
      for (const auto& log : bench::measured_csvs(results, "scalar-block-log")) {
        const std::string name = log.filename().string();
        if (!name.ends_with(kind.log)) continue;
        const auto bytes =
            log.parent_path() / (name.substr(0, name.size() - kind.log.size()) + kind.bytes);
        if (!std::filesystem::exists(bytes))
          throw std::runtime_error(log.string() + ": no " + bytes.string() + " beside it");
        auto blocks = read_blocks(log);
        const auto steps =
            log.parent_path() /
            (name.substr(0, name.size() - std::string(".csv").size()) + "-steps.csv");
        if (kind.per_call && std::filesystem::exists(steps)) with_step_starts(blocks, steps);
        for (const Call& c : kind.per_call ? with_call_bytes(blocks, log, bytes)
                                           : with_launch_bytes(blocks, log, bytes)) {
          if (n_only > 0 && c.N != n_only) continue;
          const double model = sm_read(c, false), replayed = sm_read(c, true);
          const bool stepped = std::any_of(c.blocks.begin(), c.blocks.end(),
                                           [](const auto& b) { return !b.step_starts.empty(); });
          ++rows;
          within_model += std::abs(c.measured / model - 1) <= kGoal;
          within_log += std::abs(c.measured / replayed - 1) <= kGoal;
          fmt::print(
              "| {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {} |\n",
              name, c.N, c.heads, c.causal ? "yes" : "no", c.call, c.measured / 1e9, model / 1e9,
              c.measured / model, replayed / 1e9, c.measured / replayed, stepped ? "yes" : "no");
          std::fflush(stdout);
          calls.emplace_back(name, c);
        }
      }
    }
    if (rows == 0)
      throw std::runtime_error("no call in a *-scalar-block-log*.csv of " + results +
                               (n_only > 0 ? " at N = " + std::to_string(n_only) : "") +
                               ": give --results bench/results");
    fmt::print("\nWithin 2%: the model's schedule {} of {}, the log replayed {} of {}\n",
               within_model, rows, within_log, rows);

    // A head's blocks that end together though they started apart: the one behind ran faster.
    fmt::print(
        "\nBlocks of a head that ended within {:.0f} us of its last end: the head whose last of "
        "them started furthest behind its first, as a share of the head's span\n\n"
        "| log | N | call | head | blocks | last start / span |\n|---|---|---|---|---|---|\n",
        kTogetherNs / 1e3);
    double widest = 0;
    int unmasked = 0;
    for (const auto& [name, c] : calls) {
      if (c.causal) continue;  // blocks of a head end apart under the mask: their lengths differ
      ++unmasked;
      const WidestCatchUp w = widest_catch_up(c);
      widest = std::max(widest, w.share);
      fmt::print("| {} | {} | {} | {} | {} | {:.3f} |\n", name, c.N, c.call, w.head, w.blocks,
                 w.share);
    }
    if (unmasked == 0) {
      fmt::print("\nNo call without the causal mask: no head's blocks to compare\n");
      return 0;
    }
    fmt::print(
        "\nA step whose tiles the L2 held takes at most 1 - {:.3f} = {:.3f} of one whose tiles came "
        "from DRAM; the grid model takes {:.3f} (measured::kScalarL2StepShare)\n",
        widest, 1 - widest, app::measured::kScalarL2StepShare.l2_step_share);
  } catch (const std::exception& e) {
    fmt::print(stderr, "scalar_l1_vs_block_log: {}\n", e.what());
    return 2;
  }
  return 0;
}

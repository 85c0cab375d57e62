// The scalar kernel's reads into the SMs beside a block log: on the H200 a build of the kernel
// that logs each block's SM (%smid) and its start and end (%globaltimer) ran under Nsight
// Compute, so every logged call has its own l1tex__m_xbar2l1tex_read_bytes (bench/gpu/NOTES.md,
// "The scalar kernel at 16 heads"). This program reads the logs (*-scalar-block-log-ncu.csv:
// N, d, dtype, heads, call, and per block its SM, start and end) and the bytes
// (*-scalar-block-log-ncu-bytes.csv: the profiled launches in order, for each N a warm-up and
// then the logged calls), and predicts each call twice through the kernel's mirror
// (lessons/gpu_bridge/kernels.cpp, app::predict): with the grid model's own schedule (slot k
// on SM k mod 132, blocks in step) and with the log replayed (sim::GridSchedule::logged: each
// block on its logged SM, its K and V tiles at an even pace between its start and end, through
// that SM's L1). docs/IO-LEVELS.md, "The scalar kernel: blocks that share an SM share its L1",
// reads the table.
//
//   ./build/bench/simulator/scalar_l1_vs_block_log
//   ./build/bench/simulator/scalar_l1_vs_block_log --n 4096
#include "gpu_bridge/kernels.hpp"
#include "measured_csvs.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
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
  double measured = 0;                   // bytes into the SMs
};

using bench::csv_fields;

// The column `name` of a CSV header, or an error that names the file.
std::size_t column(const std::vector<std::string>& header, const std::string& name,
                   const std::filesystem::path& file) {
  const auto at = std::find(header.begin(), header.end(), name);
  if (at == header.end()) throw std::runtime_error(file.string() + ": no column " + name);
  return std::size_t(at - header.begin());
}

// The logged calls of one log, in (N, call) order, with the bytes of `bytes_file`.
std::vector<Call> read_log(const std::filesystem::path& log, const std::filesystem::path& bytes) {
  std::map<std::pair<cpu::Index, cpu::Index>, Call> calls;
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  const auto header = csv_fields(line);
  const std::size_t N = column(header, "N", log), d = column(header, "d", log),
                    dtype = column(header, "dtype", log), heads = column(header, "heads", log),
                    call = column(header, "call", log), block = column(header, "block", log),
                    sm = column(header, "sm", log), start = column(header, "start_ns", log),
                    end = column(header, "end_ns", log);
  while (std::getline(in, line)) {
    const auto f = csv_fields(line);
    if (f.size() != header.size()) continue;
    Call& c = calls[{std::stoll(f[N]), std::stoll(f[call])}];
    c.N = std::stoll(f[N]), c.d = std::stoll(f[d]), c.heads = std::stoll(f[heads]);
    c.call = std::stoll(f[call]), c.dtype = f[dtype];
    const auto b = std::size_t(std::stoll(f[block]));
    if (c.blocks.size() <= b) c.blocks.resize(b + 1);
    c.blocks[b] = {std::stoll(f[sm]), std::stod(f[start]), std::stod(f[end])};
  }
  std::vector<double> launches;  // the metric of each profiled launch, in order
  std::ifstream bin(bytes);
  std::getline(bin, line);
  const auto bheader = csv_fields(line);
  const std::size_t metric = column(bheader, "metric", bytes),
                    value = column(bheader, "value", bytes);
  while (std::getline(bin, line)) {
    const auto f = csv_fields(line);
    if (f.size() == bheader.size() && f[metric] == kMetric) launches.push_back(std::stod(f[value]));
  }
  std::vector<Call> out;
  std::size_t at = 0;
  cpu::Index last_n = -1;
  for (auto& [key, c] : calls) {
    if (key.first != last_n) ++at, last_n = key.first;  // that N's warm-up, not logged
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

// The SMs' reads of one call, as the mirror predicts them with or without its log.
double sm_read(const Call& c, bool replay_log) {
  app::KernelRun run{.kernel = "scalar", .n = c.N, .d = c.d, .heads = c.heads, .dtype = c.dtype};
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
    const std::string kLog = "-scalar-block-log-ncu.csv",
                      kBytes = "-scalar-block-log-ncu-bytes.csv";
    int rows = 0, within_model = 0, within_log = 0;
    fmt::print(
        "| log | N | heads | call | measured GB | model GB | meas / model | replayed GB | "
        "meas / replayed |\n|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& log : bench::measured_csvs(results, "-scalar-block-log-ncu")) {
      const std::string name = log.filename().string();
      if (!name.ends_with(kLog)) continue;
      const auto bytes = log.parent_path() / (name.substr(0, name.size() - kLog.size()) + kBytes);
      if (!std::filesystem::exists(bytes))
        throw std::runtime_error(log.string() + ": no " + bytes.string() + " beside it");
      for (const Call& c : read_log(log, bytes)) {
        if (n_only > 0 && c.N != n_only) continue;
        const double model = sm_read(c, false), replayed = sm_read(c, true);
        ++rows;
        within_model += std::abs(c.measured / model - 1) <= kGoal;
        within_log += std::abs(c.measured / replayed - 1) <= kGoal;
        fmt::print("| {} | {} | {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} |\n", name,
                   c.N, c.heads, c.call, c.measured / 1e9, model / 1e9, c.measured / model,
                   replayed / 1e9, c.measured / replayed);
        std::fflush(stdout);
      }
    }
    if (rows == 0)
      throw std::runtime_error("no call in a *" + kLog + " of " + results +
                               (n_only > 0 ? " at N = " + std::to_string(n_only) : "") +
                               ": give --results bench/results");
    fmt::print("\nWithin 2%: the model's schedule {} of {}, the log replayed {} of {}\n",
               within_model, rows, within_log, rows);
  } catch (const std::exception& e) {
    fmt::print(stderr, "scalar_l1_vs_block_log: {}\n", e.what());
    return 2;
  }
  return 0;
}

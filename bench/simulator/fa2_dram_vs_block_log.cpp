// fa2's DRAM reads past the L2's crossover beside a block log: on the H200 fa2's kernel built
// with its block log (bench_block_log, gpu/kernels/block_log.cuh) ran under Nsight Compute, so
// every logged call has its own dram__bytes_read.sum. This program reads the logs
// (*-fa2-block-log.csv: N, d, dtype, heads, call, and per block its SM, start and end), the
// bytes (*-fa2-block-log-bytes.csv: heads, N, call, dram_read_bytes, dram_written_bytes) and
// the partition each SM of that GPU reads through (*-fa2-block-log-l2-partitions.csv, from
// bench_l2_partitions in the same call), and predicts each call with the H200 profile's grid
// model three ways: as `flashlab compare` runs it (blocks in step, placed as the H200's first
// wave), with the blocks older first (sim::GridSchedule::older_first at the profile's
// older_block_lead: each SM's older block the faster; no log) and with the log replayed
// (sim::GridSchedule::logged: each block on its logged SM and that SM's partition, its K and V
// tiles at an even pace between its logged start and end).
// docs/IO-LEVELS.md, "Past the crossover", reads the table.
//
//   ./build/bench/simulator/fa2_dram_vs_block_log
//   ./build/bench/simulator/fa2_dram_vs_block_log --heads 16 --n 65536 --replacement lru
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/profiles.hpp"
#include "measured_csvs.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace flashlab;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGoal = 0.15;  // DRAM bytes within 15%

using bench::csv_fields;
using Key = std::tuple<cpu::Index, cpu::Index, cpu::Index>;  // heads, N, call

struct Call {
  cpu::Index heads = 0, N = 0, d = 0, call = 0;
  std::vector<sim::LoggedBlock> blocks;  // in block order
  double read = 0;                       // measured DRAM bytes read
};

// A CSV's rows as header-named fields, or an error that names the file and the column.
class Csv {
 public:
  explicit Csv(const std::filesystem::path& path) : path_(path), in_(path) {
    if (!in_) throw std::runtime_error("cannot read " + path.string());
    std::string line;
    std::getline(in_, line);
    header_ = csv_fields(line);
  }
  bool next() {
    std::string line;
    if (!std::getline(in_, line)) return false;
    fields_ = csv_fields(line);
    if (fields_.size() != header_.size())
      throw std::runtime_error(path_.string() + ": a row of " + std::to_string(fields_.size()) +
                               " fields under a header of " + std::to_string(header_.size()));
    return true;
  }
  const std::string& operator[](const std::string& name) const {
    for (std::size_t i = 0; i < header_.size(); ++i)
      if (header_[i] == name) return fields_[i];
    throw std::runtime_error(path_.string() + ": no column " + name);
  }
  std::int64_t integer(const std::string& name) const { return std::stoll((*this)[name]); }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  std::vector<std::string> header_, fields_;
};

std::map<Key, Call> read_calls(const std::filesystem::path& dir) {
  std::map<Key, Call> calls;
  for (const auto& path : bench::measured_csvs(dir, "-fa2-block-log.csv")) {
    Csv csv(path);
    while (csv.next()) {
      const Key key{csv.integer("heads"), csv.integer("N"), csv.integer("call")};
      Call& c = calls[key];
      c.heads = std::get<0>(key), c.N = std::get<1>(key), c.call = std::get<2>(key);
      c.d = csv.integer("d");
      if (csv.integer("block") != cpu::Index(c.blocks.size()))
        throw std::runtime_error(path.string() + ": blocks out of order");
      c.blocks.push_back({csv.integer("sm"), double(csv.integer("start_ns")),
                          double(csv.integer("end_ns"))});
    }
  }
  for (const auto& path : bench::measured_csvs(dir, "-fa2-block-log-bytes")) {
    Csv csv(path);
    while (csv.next()) {
      const auto it = calls.find({csv.integer("heads"), csv.integer("N"), csv.integer("call")});
      if (it != calls.end()) it->second.read = std::stod(csv["dram_read_bytes"]);
    }
  }
  return calls;
}

// The partition of each SM: bench_l2_partitions' verdicts against reference SM 0.
std::vector<cpu::Index> read_sm_partitions(const std::filesystem::path& dir, cpu::Index sms) {
  std::vector<cpu::Index> part(std::size_t(sms), -1);
  for (const auto& path : bench::measured_csvs(dir, "-fa2-block-log-l2-partitions")) {
    Csv csv(path);
    while (csv.next())
      if (csv["kind"] == "sm" && csv["reference"] == "0")
        part.at(std::size_t(csv.integer("sm"))) = std::stoll(csv["partition"]);
  }
  for (const cpu::Index p : part)
    if (p < 0) throw std::runtime_error("an SM without a partition: give the log's l2-partitions CSV");
  return part;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fa2's DRAM reads beside its block logs: the grid model in step and the log replayed"};
  const sim::HardwareProfile& h200 = sim::find_profile("h200");
  std::string results = "bench/results", replacement{to_string(h200.l2_replacement)};
  cpu::Index heads = 0, n = 0;
  app.add_option("--results", results, "the folder of measured CSVs")->capture_default_str();
  app.add_option("--heads", heads, "only the calls of this many heads");
  app.add_option("--n", n, "only the calls of this N");
  app.add_option("--replacement", replacement, "the L2's replacement (sets: with home copies)")
      ->capture_default_str()
      ->check(CLI::IsMember(sim::l2_replacement_names()));
  CLI11_PARSE(app, argc, argv);
  try {
    const auto calls = read_calls(results);
    if (calls.empty()) throw std::runtime_error("no fa2 block log in " + results);
    const std::vector<cpu::Index> sm_partitions = read_sm_partitions(results, h200.sm_count);
    const sim::L2Replacement victims = *sim::parse_l2_replacement(replacement);
    std::map<std::pair<cpu::Index, cpu::Index>, std::pair<double, double>> model;  // by shape
    fmt::print("DRAM read, MiB; ratios measured / predicted; H200 profile, {}{}\n\n"
               "| heads, N, call | measured | in step | ratio | older first | ratio | log replayed "
               "| ratio |\n|---|---|---|---|---|---|---|---|\n",
               replacement,
               sim::with_replacement(h200, {}, victims).l2_home_copies ? " with home copies" : "");
    int within_step = 0, within_older = 0, within_log = 0, rows = 0;
    for (const auto& [key, c] : calls) {
      if ((heads && c.heads != heads) || (n && c.N != n) || c.read <= 0) continue;
      const gpu::KernelConfig fa2 = gpu::fa2::config(c.d, FLASHLAB_BF16);
      sim::GridProblem g = sim::on_gpu(h200, {.N = c.N,
                                              .d = c.d,
                                              .heads = c.heads,
                                              .Br = fa2.Br,
                                              .Bc = fa2.Bc,
                                              .blocks_per_sm = fa2.blocks_per_sm,
                                              .seed = 1});
      g = sim::with_replacement(h200, g, victims);
      auto& [step, older] = model[{c.heads, c.N}];
      if (step == 0) {
        step = double(sim::run_grid(g).dram_read());
        sim::GridProblem o = g;
        o.schedule = sim::GridSchedule::older_first;
        o.older_block_lead = h200.older_block_lead;
        older = double(sim::run_grid(o).dram_read());
      }
      g.schedule = sim::GridSchedule::logged;
      g.block_log = c.blocks;
      g.sm_partitions = sm_partitions;
      const double replayed = double(sim::run_grid(g).dram_read());
      fmt::print("| {}, {}, {} | {:.1f} | {:.1f} | {:.3f} | {:.1f} | {:.3f} | {:.1f} | {:.3f} |\n",
                 c.heads, c.N, c.call, c.read / kMiB, step / kMiB, c.read / step, older / kMiB,
                 c.read / older, replayed / kMiB, c.read / replayed);
      std::fflush(stdout);
      ++rows;
      within_step += std::abs(c.read / step - 1) <= kGoal;
      within_older += std::abs(c.read / older - 1) <= kGoal;
      within_log += std::abs(c.read / replayed - 1) <= kGoal;
    }
    if (rows == 0)
      throw std::runtime_error(fmt::format(
          "no logged call with its bytes at heads = {}, N = {} in {}: give a shape the logs hold "
          "(0 for any)",
          heads, n, results));
    fmt::print("\nwithin 15%: in step {} of {}, older first {} of {}, log replayed {} of {}\n",
               within_step, rows, within_older, rows, within_log, rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fa2_dram_vs_block_log: %s\n", e.what());
    return 1;
  }
  return 0;
}

// The backward's main kernel: its DRAM reads beside its block log. bench_backward_block_log
// (the v3 main kernel built with its block and step log, gpu/kernels/block_log.cuh) ran under
// Nsight Compute through bench/gpu/block_log.py, so every logged call has its own
// dram__bytes_read.sum (the main kernel alone, from a cold L2). This program reads the logs
// (*-backward-block-log.csv: per block its SM, start and end; -steps.csv: when it began each
// (query head, query tile) step), the bytes (-bytes.csv) and the partition each SM reads
// through (-l2-partitions.csv), and predicts each call's main kernel with the profile's grid
// model three ways:
//   compare:  as `flashlab compare --pass backward` runs it (sim::paced_on_gpu: the blocks in
//             step, each SM's older block ahead, where an SM holds several)
//   drift:    each block at its own pace, drawn with the profile's block_time_spread (seed 1)
//   replayed: the log (sim::GridSchedule::logged): each block on its logged SM and that SM's
//             partition, each step when the block began it (with --even-pace, or where the
//             log has no -steps.csv, its steps evenly between its start and end).
// With --tensors, what each tensor read from DRAM, in step and replayed, under each call, and
// where the log's bytes hold the L2's reduction misses (block_log.py --by-operation), the
// measured DRAM read split into the reductions' and the loads' beside the model's. With
// --home-copies off every schedule runs without the profile's home copies (grid.hpp); with
// --reduced-window W > 1, with reduced lines kept among a set's W least recently used
// (l2_policy.hpp). bench/gpu/NOTES.md, "The backward's blocks logged", reads the table.
//
//   ./build/bench/simulator/backward_dram_vs_block_log --profile h100 --results bench/results/h100
//       [--kv-heads 2] [--n 10240] [--even-pace] [--tensors] [--home-copies off]
//       [--reduced-window 3]
#include "gpu_bridge/pass_kernels.hpp"

#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"
#include "measured_csvs.hpp"
#include "step_logs.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace flashlab;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGoal = 0.15;  // DRAM bytes within 15%

using bench::CsvRows;
using Key =
    std::tuple<cpu::Index, cpu::Index, cpu::Index, bool, cpu::Index>;  // heads, KV, N, causal, call

struct Call {
  cpu::Index heads = 0, kv_heads = 0, N = 0, d = 0, call = 0;
  bool causal = false;
  std::vector<sim::LoggedBlock> blocks;   // in block order
  double read = 0;                        // measured DRAM bytes read
  // The L2's reduction sectors that missed (block_log.py --by-operation), each a sector read
  // from DRAM to add into; none where the bytes were counted without them.
  std::optional<double> reduction_misses;
  std::vector<cpu::Index> sm_partitions;  // of the GPU it ran on
  std::string log;                        // its file
};

// The block logs in `dir`: block_log.py's PREFIX.csv of each prefix naming
// "-backward-block-log", beside its -steps, -bytes and -l2-partitions CSVs.
std::vector<std::filesystem::path> block_logs(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> logs;
  for (const auto& path : bench::measured_csvs(dir, "-backward-block-log")) {
    const std::string name = path.filename().string();
    const auto ends = [&](const std::string& tail) {
      return name.size() >= tail.size() &&
             name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (!ends("-steps.csv") && !ends("-bytes.csv") && !ends("-l2-partitions.csv"))
      logs.push_back(path);
  }
  return logs;
}

// The partition of each SM of the GPU a log ran on: bench_l2_partitions' verdicts against
// reference SM 0, beside the log.
std::vector<cpu::Index> read_sm_partitions(const std::string& stem, cpu::Index sms) {
  std::vector<cpu::Index> part(std::size_t(sms), -1);
  CsvRows rows(stem + "-l2-partitions.csv");
  const std::size_t kind = rows.column("kind"), reference = rows.column("reference"),
                    sm = rows.column("sm"), partition = rows.column("partition");
  for (std::vector<std::string> f; rows.next(f);)
    if (f[kind] == "sm" && f[reference] == "0")
      part.at(std::size_t(std::stoll(f[sm]))) = std::stoll(f[partition]);
  for (const cpu::Index p : part)
    if (p < 0) throw std::runtime_error(stem + "-l2-partitions.csv: an SM without a partition");
  return part;
}

// A call's key in any of a log's CSVs: their heads, kv_heads, N, causal and call columns.
class KeyColumns {
 public:
  explicit KeyColumns(const CsvRows& rows)
      : heads_(rows.column("heads")),
        kv_(rows.column("kv_heads")),
        n_(rows.column("N")),
        causal_(rows.column("causal")),
        call_(rows.column("call")) {}
  Key operator()(const std::vector<std::string>& f) const {
    return {std::stoll(f[heads_]), std::stoll(f[kv_]), std::stoll(f[n_]), f[causal_] == "1",
            std::stoll(f[call_])};
  }

 private:
  std::size_t heads_, kv_, n_, causal_, call_;
};

// The calls of one log (PREFIX.csv): each block's SM, start and end, in block order.
std::map<Key, Call> read_blocks(const std::filesystem::path& log) {
  std::map<Key, Call> calls;
  CsvRows rows(log);
  const KeyColumns key_of(rows);
  const std::size_t d = rows.column("d"), block = rows.column("block"), sm = rows.column("sm"),
                    start = rows.column("start_ns"), end = rows.column("end_ns");
  for (std::vector<std::string> f; rows.next(f);) {
    const Key key = key_of(f);
    Call& c = calls[key];
    std::tie(c.heads, c.kv_heads, c.N, c.causal, c.call) = key;
    c.log = log.filename().string();
    c.d = std::stoll(f[d]);
    const auto b = std::size_t(std::stoll(f[block]));
    if (c.blocks.size() <= b) c.blocks.resize(b + 1);
    c.blocks[b] = {std::stoll(f[sm]), std::stod(f[start]), std::stod(f[end])};
  }
  return calls;
}

// Each block's step starts from the step log beside the log (PREFIX-steps.csv), every step
// from the first to its last.
void add_step_starts(std::map<Key, Call>& calls, const std::string& steps_csv) {
  CsvRows rows(steps_csv);
  const KeyColumns key_of(rows);
  const std::size_t block = rows.column("block"), step = rows.column("step"),
                    start = rows.column("start_ns");
  for (std::vector<std::string> f; rows.next(f);) {
    const auto it = calls.find(key_of(f));
    const auto b = std::size_t(std::stoll(f[block])), j = std::size_t(std::stoll(f[step]));
    if (it == calls.end() || b >= it->second.blocks.size())
      throw std::runtime_error(steps_csv + ": a step of a block the log beside it lacks");
    bench::set_step_start(it->second.blocks[b], j, std::stod(f[start]));
  }
  for (const auto& [key, c] : calls)
    if (const auto b = bench::block_with_gap(c.blocks))
      throw std::runtime_error(fmt::format(
          "{}: block {} of call {} has a step missing before its last: give every step it "
          "began, or no step log",
          c.log, *b, c.call));
}

// Every logged call of one log, with its blocks, their steps (where `step_log` and the log has
// a -steps.csv beside it; else each block at an even pace), its DRAM bytes read (-bytes.csv)
// and its GPU's partitions (-l2-partitions.csv).
std::map<Key, Call> read_calls(const std::filesystem::path& log, cpu::Index sms, bool step_log) {
  std::map<Key, Call> calls = read_blocks(log);
  const std::string stem = log.string().substr(0, log.string().size() - 4);
  if (step_log && std::filesystem::exists(stem + "-steps.csv"))
    add_step_starts(calls, stem + "-steps.csv");
  CsvRows bytes(stem + "-bytes.csv");
  const KeyColumns key_of(bytes);
  const std::size_t read = bytes.column("dram_read_bytes");
  const auto misses = bytes.find("l2_reduction_miss_sectors");
  for (std::vector<std::string> f; bytes.next(f);)
    if (const auto it = calls.find(key_of(f)); it != calls.end()) {
      it->second.read = std::stod(f[read]);
      if (misses) it->second.reduction_misses = std::stod(f[*misses]);
    }
  const std::vector<cpu::Index> partitions = read_sm_partitions(stem, sms);
  for (auto& [key, c] : calls) c.sm_partitions = partitions;
  return calls;
}

// The main kernel's grid, as the backward's mirror gives it for the call.
sim::GridProblem main_grid(const Call& c) {
  const app::PassPrediction p = app::predict(app::BackwardRun{.batch = 1,
                                                              .heads = c.heads,
                                                              .kv_heads = c.kv_heads,
                                                              .n = c.N,
                                                              .d = c.d,
                                                              .causal = c.causal});
  if (!p.report) throw std::runtime_error("no backward mirror for a logged call: " + p.why_not);
  for (const sim::Launch& l : p.report->launches)
    if (l.grid && l.grid->pass == sim::GridPass::backward_main) return *l.grid;
  throw std::runtime_error("the backward's mirror gave no main kernel's grid");
}

// The DRAM read split by operation, measured beside the model: the reductions' (the L2's
// reduction sectors that missed, each read from DRAM to add into: the dQ accumulator) and the
// loads' (the rest of the DRAM read: Q, dO, L, D, K and V).
void print_by_operation(const Call& c, const sim::GridReport& in_step,
                        const sim::GridReport& replay) {
  const double reductions = *c.reduction_misses * double(sim::kSectorBytes);
  const auto accumulator = [](const sim::GridReport& r) {
    return double(r.tensor("dQ accumulator").dram_read);
  };
  const double step_acc = accumulator(in_step), replay_acc = accumulator(replay);
  const double step_loads = double(in_step.dram_read()) - step_acc;
  const double replay_loads = double(replay.dram_read()) - replay_acc;
  const double loads = c.read - reductions;
  fmt::print("|   measured: reductions | | {:.1f} | {:.1f} | {:.3f} | | | {:.1f} | {:.3f} |\n",
             reductions / kMiB, step_acc / kMiB, reductions / step_acc, replay_acc / kMiB,
             reductions / replay_acc);
  fmt::print("|   measured: loads | | {:.1f} | {:.1f} | {:.3f} | | | {:.1f} | {:.3f} |\n",
             loads / kMiB, step_loads / kMiB, loads / step_loads, replay_loads / kMiB,
             loads / replay_loads);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The backward's main kernel: DRAM reads beside its block logs, the grid model in "
      "step, drifting and replayed"};
  std::string results = "bench/results", profile = "h200";
  app.add_option("--results", results, "the folder of the logs and their bytes")
      ->capture_default_str();
  app.add_option("--profile", profile, "the GPU the logs ran on (its profile)")
      ->capture_default_str();
  cpu::Index kv_heads = 0, n = 0;
  app.add_option("--kv-heads", kv_heads, "only the calls of this many KV heads");
  app.add_option("--n", n, "only the calls of this N");
  bool tensors = false;
  app.add_flag("--tensors", tensors,
               "after each call, the DRAM bytes each tensor read, in step and replayed");
  std::string home_copies = "on";
  app.add_option("--home-copies", home_copies,
                 "the L2's home copies in every schedule: on (the profile's) or off (a line read "
                 "across is held where it was read alone)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  int reduced_window = 1;
  app.add_option("--reduced-window", reduced_window,
                 "reduced lines kept in every schedule: a set's victim is the least recently used "
                 "line not reduced into among its this many least recently used (1: the "
                 "profile's plain LRU)")
      ->capture_default_str();
  bool even_pace = false;
  app.add_flag("--even-pace", even_pace,
               "replay each block at an even pace between its logged start and end, its step "
               "log left out (a log stored without one replays so anyway)");
  CLI11_PARSE(app, argc, argv);
  try {
    app::set_target_profile(profile);
    const sim::HardwareProfile& gpu = app::target_profile();
    sim::check_l2_reduced_window(reduced_window, gpu.l2_ways, gpu.l2_replacement);
    const auto logs = block_logs(results);
    if (logs.empty()) throw std::runtime_error("no backward block log in " + results);
    fmt::print(
        "The main kernel's DRAM read, MiB; ratios measured / predicted; {} profile{}{}\n\n"
        "| log | heads / KV, N, call | measured | compare | ratio | drift | ratio | replayed "
        "| ratio |\n|---|---|---|---|---|---|---|---|---|\n",
        gpu.name, home_copies == "on" ? "" : ", its home copies off",
        reduced_window == 1
            ? ""
            : fmt::format(", reduced lines kept among a set's {} oldest", reduced_window));
    // The two schedules that take no log, run once a shape: in step (its report, for
    // --tensors too) and drifting.
    struct Unlogged {
      sim::GridReport in_step;
      double drift = 0;
    };
    std::map<std::tuple<cpu::Index, cpu::Index, cpu::Index, bool>, Unlogged> model;
    int within_step = 0, within_drift = 0, within_replay = 0, rows = 0;
    // The profile's grid as the options ask: without home copies (--home-copies off), with
    // reduced lines kept (--reduced-window).
    const auto as_asked = [&](sim::GridProblem p) {
      p.l2_home_copies = p.l2_home_copies && home_copies == "on";
      p.l2_reduced_window = reduced_window;
      return p;
    };
    for (const auto& log : logs)
      for (const auto& [key, c] : read_calls(log, gpu.sm_count, !even_pace)) {
        if (c.read <= 0 || (kv_heads && c.kv_heads != kv_heads) || (n && c.N != n)) continue;
        const sim::GridProblem g = main_grid(c);
        const auto shape = std::tuple{c.heads, c.kv_heads, c.N, c.causal};
        if (!model.contains(shape)) {
          sim::GridProblem d = as_asked(sim::on_gpu(gpu, g));
          d.schedule = sim::GridSchedule::drift;
          d.block_time_spread = gpu.block_time_spread;
          d.seed = 1;
          model[shape] = {sim::run_grid(as_asked(sim::paced_on_gpu(gpu, g))),
                          double(sim::run_grid(d).dram_read())};
        }
        const Unlogged& unlogged = model.at(shape);
        const double paced = double(unlogged.in_step.dram_read()), drift = unlogged.drift;
        sim::GridProblem r = as_asked(sim::on_gpu(gpu, g));
        r.schedule = sim::GridSchedule::logged;
        r.block_log = c.blocks;
        r.sm_partitions = c.sm_partitions;
        const sim::GridReport replay = sim::run_grid(r);
        const double replayed = double(replay.dram_read());
        fmt::print(
            "| {} | {} / {}, {}{}, {} | {:.1f} | {:.1f} | {:.3f} | {:.1f} | {:.3f} | {:.1f} | "
            "{:.3f} |\n",
            c.log, c.heads, c.kv_heads, c.N, c.causal ? " causal" : "", c.call, c.read / kMiB,
            paced / kMiB, c.read / paced, drift / kMiB, c.read / drift, replayed / kMiB,
            c.read / replayed);
        if (tensors) {
          for (const sim::TensorTraffic& t : replay.tensors)
            fmt::print("|   {} | | | {} | | | | {} | |\n", t.name,
                       sim::format_bytes(double(unlogged.in_step.tensor(t.name).dram_read)),
                       sim::format_bytes(double(t.dram_read)));
          if (c.reduction_misses) print_by_operation(c, unlogged.in_step, replay);
        }
        std::fflush(stdout);
        ++rows;
        within_step += std::abs(c.read / paced - 1) <= kGoal;
        within_drift += std::abs(c.read / drift - 1) <= kGoal;
        within_replay += std::abs(c.read / replayed - 1) <= kGoal;
      }
    if (rows == 0)
      throw std::runtime_error(fmt::format(
          "no logged call with its bytes at {} KV heads, N = {} in {}: give a shape the logs "
          "hold (0 for any)",
          kv_heads, n, results));
    fmt::print("\nwithin 15%: compare {} of {}, drift {} of {}, replayed {} of {}\n", within_step,
               rows, within_drift, rows, within_replay, rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backward_dram_vs_block_log: %s\n", e.what());
    return 1;
  }
  return 0;
}

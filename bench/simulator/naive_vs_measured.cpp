// The naive kernel's DRAM reads beside every run of it measured on the H200: reads the
// `flashlab compare` CSVs in bench/results (rows of kernel naive with dram_read_measured)
// and prints, per row, the reads measured and predicted by the kernel's mirror (the three
// launches each cold, the softmax's resident rows in flight: lessons/gpu_bridge/kernels.cpp)
// through the default L2 (LRU over tiles) and through an L2 of a policy to choose
// (l2_policy.hpp: sets, random), with measured / predicted; causal rows under the top-left
// mask (N_q = N_k).
//
// Each figure is also written as compulsory + x of the re-readable passes: compulsory is
// what the three launches must read once (Q and K; S once; P and V: the mirror with one row
// of S in flight, where every later pass hits), the re-readable passes are the softmax's
// passes after its first, (score_reads - 1) x the bytes of S, and
//     x = (DRAM read - compulsory) / ((score_reads - 1) S heads),
// 0 when every later pass hits, 1 when each comes from DRAM again.
//
//   ./build/bench/simulator/naive_vs_measured                    # every row, policy sets
//   ./build/bench/simulator/naive_vs_measured --replacement random --seed 2
//   ./build/bench/simulator/naive_vs_measured --only naive-transition --n 9216
//   ./build/bench/simulator/naive_vs_measured --only naive-onset      # N = 5120 .. 8192
//
// With --writes it prints instead, for the rows that carry dram_written_measured, the reads and
// writes of the mirror as `flashlab compare` runs it (its own policy, the cap on what the L2
// holds dirty measured on the H200, sim::l2_dirty_room, shared by the heads as the room is) and
// without the cap.
//   ./build/bench/simulator/naive_vs_measured --writes
//
// With --rows-in-flight FILE it reads instead the softmax's traffic alone
// (bench/gpu/l2_rows_in_flight.py's CSV: one launch a row, with k blocks an SM, P written or
// not, the blocks free, persistent or in lockstep, on both sides of the L2 or one) and sets
// beside each launch's measured x the mirror's for the same rows in flight: k x SMs rows, each
// side's half in its partition, P written, through the profile's L2 (LRU, and the sets with home
// copies as the mirror runs them), the rows in step (the mirror's order before 2026-12-04)
// and staggered (as built). The mirror's partitions run alike, so a launch on one side alone
// has no prediction. A CSV without measured columns prints the predictions alone; --n keeps
// the launches of one N.
//   ./build/bench/simulator/naive_vs_measured --rows-in-flight
//   bench/results/2026-12-04-h200-naive-softmax-rows-in-flight.csv
#include "gpu_bridge/kernels.hpp"
#include "measured_csvs.hpp"

#include "flashlab/cpu/options.hpp"
#include "flashlab/sim/simulate.hpp"

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
#include <string_view>
#include <stdexcept>
#include <string>
#include <vector>

using namespace flashlab;

namespace {

constexpr double kGoal = 0.15;      // DRAM bytes within 15%
constexpr double kMiB = 1048576.0;  // bytes, for the tables

struct Measured {
  std::string source;  // the CSV's file name
  cpu::Index heads = 1, N = 0, d = 0;
  double read = 0;                  // bytes
  bool causal = false;              // N_q = N_k: both alignments see the same scores
  std::optional<double> written{};  // bytes, where the CSV has them
};

using bench::csv_fields;

// The naive rows of the CSVs whose name contains `only` (all: empty), of size N = n (all: 0).
std::vector<Measured> read_results(const std::filesystem::path& dir, const std::string& only,
                                   cpu::Index n_only) {
  std::vector<Measured> out;
  for (const auto& path : bench::measured_csvs(dir, only)) {
    std::ifstream in(path);
    std::string line;
    if (!std::getline(in, line) || line.find("dram_read_measured") == std::string::npos) continue;
    const auto header = csv_fields(line);
    const auto col = [&](const char* name) {
      return std::size_t(std::find(header.begin(), header.end(), name) - header.begin());
    };
    const std::size_t kernel = col("kernel"), n = col("N"), d = col("d"), heads = col("heads"),
                      causal = col("causal"), read = col("dram_read_measured"),
                      written = col("dram_written_measured");
    if (kernel == header.size()) continue;  // the passes' sweeps: no kernel column, no naive row
    while (std::getline(in, line)) {
      const auto f = csv_fields(line);
      if (f.size() <= read || f[kernel] != "naive" || f[read].empty() ||
          (n_only > 0 && std::stoll(f[n]) != n_only))
        continue;
      out.push_back({path.filename().string(), std::stoll(f[heads]), std::stoll(f[n]),
                     std::stoll(f[d]), std::stod(f[read]), f[causal] != "0",
                     written < f.size() && !f[written].empty()
                         ? std::optional<double>(std::stod(f[written]))
                         : std::nullopt});
    }
  }
  if (out.empty())
    throw std::runtime_error("no naive row with measured DRAM bytes in " + dir.string() +
                             (only.empty() ? "" : " whose CSV's name contains " + only) +
                             (n_only > 0 ? " at N = " + std::to_string(n_only) : ""));
  return out;
}

// The naive kernel's mirror for a measured row, as `flashlab compare` builds it.
app::KernelMirror mirror_of(const Measured& m) {
  const sim::HardwareProfile& hw = app::target_profile();
  const sim::Problem asked{.N = m.N,
                           .d = m.d,
                           .dtype = sim::DType::bf16,
                           .causal = m.causal ? cpu::Causal::top_left : cpu::Causal::none,
                           .sram_bytes = hw.sram_per_sm,
                           .l2_bytes = hw.l2_bytes};
  app::KernelMirror mirror = app::kernel_mirror("naive", asked, m.heads);
  if (!mirror.algorithm)
    throw std::runtime_error("no mirror of the naive kernel: " + mirror.why_not);
  return mirror;
}

// The bytes of the softmax's passes over S after its first, all heads (x is a share of them):
// score_reads - 1 passes over the scores the rows see, in the mirror's score dtype.
double later_passes_bytes(const Measured& m) {
  const sim::Problem p = mirror_of(m).problem;
  const double N = double(m.N), scores = m.causal ? N * (N + 1) / 2 : N * N;
  return double(p.score_reads - 1) * double(sim::bytes_of(p.score_dtype)) * scores *
         double(m.heads);
}

// The mirror's DRAM read, all heads, with the L2's policy (sets: with the profile's home
// copies, as the mirror runs it), the softmax's rows in flight (0: the mirror's own) and its
// order (absent: the mirror's own, staggered) as given.
double predict(const Measured& m, sim::L2Replacement replacement, std::uint64_t seed,
               cpu::Index rows_in_flight = 0, std::optional<bool> staggered = std::nullopt) {
  app::KernelMirror mirror = mirror_of(m);
  app::set_naive_l2_policy(mirror.problem, replacement);
  mirror.problem.l2_seed = seed;
  if (rows_in_flight > 0) mirror.problem.softmax_rows_in_flight = rows_in_flight;
  if (staggered) mirror.problem.softmax_staggered = *staggered;
  const sim::Report r = sim::count(*mirror.algorithm, mirror.problem);
  return double(r.dram_read()) * double(m.heads);
}

// The mirror's DRAM read and written, all heads, as `flashlab compare` runs it (with the
// measured cap on what the L2 holds dirty) or without the cap.
struct ReadWritten {
  double read = 0, written = 0;
};
ReadWritten predict_as_built(const Measured& m, bool dirty_cap) {
  app::KernelMirror mirror = mirror_of(m);
  if (!dirty_cap) mirror.problem.l2_dirty_cap = 0;
  const sim::Report r = sim::count(*mirror.algorithm, mirror.problem);
  return {double(r.dram_read()) * double(m.heads), double(r.dram_written()) * double(m.heads)};
}

// --writes: per measured row with its DRAM writes, the mirror's reads and writes with the dirty
// cap and without it.
int print_writes(const std::vector<Measured>& rows) {
  fmt::print(
      "MiB; ratios measured / predicted; the mirror as `flashlab compare` runs it (the whole "
      "L2, what it holds dirty capped as measured) and without the cap\n\n"
      "| csv | heads | N | d | mask | read meas. | cap | ratio | no cap | ratio | "
      "written meas. | cap | ratio | no cap | ratio |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int read_cap = 0, read_none = 0, written_cap = 0, written_none = 0, n = 0;
  double log_cap = 0, log_none = 0;
  for (const Measured& m : rows) {
    if (!m.written) continue;
    const ReadWritten cap = predict_as_built(m, /*dirty_cap=*/true);
    const ReadWritten none = predict_as_built(m, /*dirty_cap=*/false);
    const auto ratio = [](double measured, double predicted) {
      return predicted > 0 ? fmt::format("{:.3f}", measured / predicted) : std::string("-");
    };
    fmt::print(
        "| {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {} | {:.1f} | {} | {:.1f} | {:.1f} | {} | "
        "{:.1f} | {} |\n",
        m.source, m.heads, m.N, m.d, m.causal ? "causal" : "none", m.read / kMiB, cap.read / kMiB,
        ratio(m.read, cap.read), none.read / kMiB, ratio(m.read, none.read), *m.written / kMiB,
        cap.written / kMiB, ratio(*m.written, cap.written), none.written / kMiB,
        ratio(*m.written, none.written));
    std::fflush(stdout);
    ++n;
    read_cap += std::abs(m.read / cap.read - 1) <= kGoal;
    read_none += std::abs(m.read / none.read - 1) <= kGoal;
    written_cap += cap.written > 0 && std::abs(*m.written / cap.written - 1) <= kGoal;
    written_none += none.written > 0 && std::abs(*m.written / none.written - 1) <= kGoal;
    if (cap.written > 0 && none.written > 0 && *m.written > 0) {
      log_cap += std::abs(std::log(*m.written / cap.written));
      log_none += std::abs(std::log(*m.written / none.written));
    }
  }
  fmt::print(
      "\nWithin 15%, of {} rows: reads with the cap {}, without {}; writes with the cap {}, "
      "without {}; mean |log(measured / predicted)| of the writes: with the cap {:.3f}, "
      "without {:.3f}\n",
      n, read_cap, read_none, written_cap, written_none, log_cap / n, log_none / n);
  return 0;
}

// One launch of the softmax's traffic (bench/gpu/l2_rows_in_flight.py's CSV).
struct TrafficLaunch {
  int per_sm = 0;
  cpu::Index rows_in_flight = 0, N = 0;
  bool write_p = true, lockstep = false, persistent = false, one_side = false;
  std::optional<double> x;  // measured: absent in a CSV of the cases planned
};

std::vector<TrafficLaunch> read_traffic(const std::filesystem::path& path, cpu::Index n_only) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::string line;
  if (!std::getline(in, line) || line.find("blocks_per_sm") == std::string::npos)
    throw std::runtime_error(path.string() +
                             " is not l2_rows_in_flight.py's CSV (its header "
                             "names blocks_per_sm, rows_in_flight, n, rows, write_p, lockstep)");
  const auto header = csv_fields(line);
  const auto col = [&](const char* name) -> std::optional<std::size_t> {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) return std::nullopt;
    return std::size_t(it - header.begin());
  };
  const auto need = [&](const char* name) {
    const auto c = col(name);
    if (!c) throw std::runtime_error(path.string() + " has no column " + name);
    return *c;
  };
  const std::size_t per_sm = need("blocks_per_sm"), in_flight = need("rows_in_flight"),
                    n = need("n"), rows = need("rows"), write_p = need("write_p"),
                    lockstep = need("lockstep");
  // Columns of later runs: absent, every launch was a grid a row, on both sides.
  const std::optional<std::size_t> x = col("x"), persistent = col("persistent"),
                                   skipped = col("skipped_sms");
  const auto flag = [](const std::vector<std::string>& f, std::optional<std::size_t> c) {
    return c && *c < f.size() && !f[*c].empty() && f[*c] != "0";
  };
  std::vector<TrafficLaunch> out;
  while (std::getline(in, line)) {
    const auto f = csv_fields(line);
    TrafficLaunch t{.per_sm = std::stoi(f.at(per_sm)),
                    .rows_in_flight = std::stoll(f.at(in_flight)),
                    .N = std::stoll(f.at(n)),
                    .write_p = f.at(write_p) == "1",
                    .lockstep = f.at(lockstep) == "1",
                    .persistent = flag(f, persistent),
                    .one_side = flag(f, skipped),
                    .x = std::nullopt};
    if (n_only > 0 && t.N != n_only) continue;
    if (std::stoll(f.at(rows)) != t.N)
      throw std::runtime_error(fmt::format(
          "{}: a launch of {} rows of N = {}: the mirror is one head's S, N rows of N (run "
          "l2_rows_in_flight.py without --rows)",
          path.string(), f.at(rows), t.N));
    if (x && *x < f.size() && !f[*x].empty()) t.x = std::stod(f[*x]);
    out.push_back(t);
  }
  if (out.empty())
    throw std::runtime_error(path.string() + " holds no launch" +
                             (n_only > 0 ? " at N = " + std::to_string(n_only) : ""));
  return out;
}

// The mirror's x for one head's softmax with `rows` rows in flight on both sides together;
// `replacement` the L2's policy (sets: with the profile's home copies, as the mirror runs it),
// `staggered` the order of the rows' passes.
double traffic_x(cpu::Index N, cpu::Index rows, sim::L2Replacement replacement, bool staggered,
                 std::uint64_t seed) {
  // d moves the GEMMs' bytes only, which the difference below cancels.
  const Measured one_head{.source = {}, .heads = 1, .N = N, .d = 128, .read = 0};
  const double compulsory = predict(one_head, replacement, seed, 1, staggered);
  const double read = predict(one_head, replacement, seed, rows, staggered);
  return (read - compulsory) / later_passes_bytes(one_head);
}

int print_traffic(const std::filesystem::path& path, cpu::Index n_only, std::uint64_t seed) {
  constexpr double kScoreBytes = sizeof(float);  // the traffic program's S: fp32, the kernel's
  const sim::HardwareProfile& hw = app::target_profile();
  fmt::print(
      "| k | rows in flight | N | P | order | sides | in flight a side, MiB | x measured | "
      "x LRU | x sets, in step | x sets, staggered |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  struct Predicted {
    double lru, in_step, staggered;
  };
  std::map<std::pair<cpu::Index, cpu::Index>, Predicted> cache;  // (N, rows) -> x
  for (const TrafficLaunch& t : read_traffic(path, n_only)) {
    // One side alone holds all its rows in flight; both sides share them. The mirror's one L2
    // is the whole L2: both sides' rows in flight go through it.
    const cpu::Index per_side =
        t.one_side ? t.rows_in_flight : cpu::tile_count(t.rows_in_flight, hw.l2_partitions);
    const std::string order = t.lockstep ? "lockstep" : t.persistent ? "persistent" : "free";
    const std::string measured = t.x ? fmt::format("{:.3f}", *t.x) : "-";
    const double side_mib = double(per_side) * kScoreBytes * double(t.N) / kMiB;
    const auto row = [&](std::string_view sides, std::string_view predicted) {
      fmt::print("| {} | {} | {} | {} | {} | {} | {:.1f} | {} | {} |\n", t.per_sm, t.rows_in_flight,
                 t.N, t.write_p ? "written" : "not written", order, sides, side_mib, measured,
                 predicted);
    };
    if (t.one_side) {  // the mirror's partitions run alike: no prediction
      row("one", "- | - | -");
      continue;
    }
    auto it = cache.find({t.N, t.rows_in_flight});
    if (it == cache.end()) {
      const auto x = [&](sim::L2Replacement policy, bool staggered) {
        return traffic_x(t.N, t.rows_in_flight, policy, staggered, seed);
      };
      it = cache
               .emplace(
                   std::pair{t.N, t.rows_in_flight},
                   Predicted{x(sim::L2Replacement::lru, true), x(sim::L2Replacement::sets, false),
                             x(sim::L2Replacement::sets, true)})
               .first;
    }
    row("both", fmt::format("{:.3f} | {:.3f} | {:.3f}", it->second.lru, it->second.in_step,
                            it->second.staggered));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The naive kernel's DRAM reads beside the measured runs: the mirror through an "
      "LRU L2 (the default) and through an L2 of another policy"};
  std::string results = "bench/results", replacement = "sets", only;
  std::uint64_t seed = 1;
  cpu::Index n_only = 0;
  app.add_option("--results", results, "the folder of measured CSVs")->capture_default_str();
  app.add_option("--only", only, "only the CSVs whose file name contains this");
  app.add_option("--n", n_only, "only the rows of this N (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--replacement", replacement, "the second L2's policy")
      ->capture_default_str()
      ->check(CLI::IsMember(sim::l2_replacement_names()));
  app.add_option("--seed", seed, "the key of random's draws and of the sets' hash")
      ->capture_default_str();
  std::string traffic;
  app.add_option("--rows-in-flight", traffic,
                 "the softmax's traffic alone (l2_rows_in_flight.py's CSV) instead of the "
                 "naive rows of --results");
  bool writes = false;
  app.add_flag("--writes", writes,
               "the DRAM writes (and reads) of the rows that have them, the mirror as built with "
               "the dirty cap measured on the H200 and without one (the profile's)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!traffic.empty()) return print_traffic(traffic, n_only, seed);
    if (writes) return print_writes(read_results(results, only, n_only));
    const sim::L2Replacement policy = *sim::parse_l2_replacement(replacement);  // checked above
    const std::vector<Measured> rows = read_results(results, only, n_only);
    fmt::print(
        "| csv | heads | N | d | mask | measured MiB | compulsory | x measured | LRU | x | "
        "meas / pred | {} | x | meas / pred |\n{}|\n",
        replacement,
        std::string("|---").append("|---").append("|---").append("|---").append(
            "|---|---|---|---|---|---|---|---|---|---"));
    int within_lru = 0, within_b = 0;
    for (const Measured& m : rows) {
      const double compulsory = predict(m, sim::L2Replacement::lru, seed, /*rows_in_flight=*/1);
      const double passes = later_passes_bytes(m);
      const double lru = predict(m, sim::L2Replacement::lru, seed);
      const double b = predict(m, policy, seed);
      const auto x = [&](double read) { return (read - compulsory) / passes; };
      within_lru += std::abs(m.read / lru - 1) <= kGoal;
      within_b += std::abs(m.read / b - 1) <= kGoal;
      fmt::print(
          "| {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.3f} | {:.1f} | {:.3f} | {:.3f} | "
          "{:.1f} | {:.3f} | {:.3f} |\n",
          m.source, m.heads, m.N, m.d, m.causal ? "causal" : "none", m.read / kMiB,
          compulsory / kMiB, x(m.read), lru / kMiB, x(lru), m.read / lru, b / kMiB, x(b),
          m.read / b);
      std::fflush(stdout);
    }
    fmt::print("\nReads within 15%: LRU {} of {}, {} {} of {}\n", within_lru, rows.size(),
               replacement, within_b, rows.size());
  } catch (const std::exception& e) {
    fmt::print(stderr, "naive_vs_measured: {}\n", e.what());
    return 2;
  }
  return 0;
}

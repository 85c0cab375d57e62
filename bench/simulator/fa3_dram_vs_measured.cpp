// fa3's DRAM reads, measured on the H200 with its tile order's sections on half and on a
// quarter of the L2, beside the grid model's prediction under each placement of blocks on the
// L2's partitions and each replacement: reads bench/results/*-fa3-sections-dram.csv (one
// Nsight Compute call a row: dram__bytes_read.sum of fa3 at B x H heads of N, d) and runs
// the model on the same order, fa3's scheduler with the row's share of the L2
// (gpu/include/flashlab/gpu/tile_schedule.hpp), for
//   alternate: block b on partition b mod 2, the model's placement (flashlab/sim/grid.hpp)
//   scattered: the 132 SMs' slots put on the two partitions in a shuffled, balanced order
//              (sim::scattered_partitions, one map per --seed)
//   measured:  the H200's own placement of a first wave, one block an SM
//              (sim::measured_slot_partitions, bench_l2_partitions)
// each with LRU and with hashed sets (sim::L2Replacement), and the H200 profile's model:
// measured placement, hashed sets and home copies (GridProblem::l2_home_copies), what
// `flashlab compare` runs. docs/IO-LEVELS.md, "fa3's DRAM bytes", reads the table.
//
//   ./build/bench/simulator/fa3_dram_vs_measured
//   ./build/bench/simulator/fa3_dram_vs_measured --seed 1 2 3
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/tile_schedule.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/profiles.hpp"
#include "measured_csvs.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace flashlab;
namespace fa3 = flashlab::gpu::fa3;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGoal = 0.15;  // the fidelity goal for DRAM bytes: within 15%

struct Row {
  cpu::Index B = 0, H = 0, N = 0, d = 0;
  bool causal = false;
  std::int64_t share_num = 0, share_den = 0;  // the sections' share of the L2
  double read = 0;                            // bytes
};

using bench::csv_fields;

// fa3's rows of every *-fa3-sections-dram.csv in `dir`.
std::vector<Row> read_rows(const std::filesystem::path& dir) {
  std::vector<Row> rows;
  for (const auto& file : bench::measured_csvs(dir, "-fa3-sections-dram")) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    const std::vector<std::string> header = csv_fields(line);
    const auto col = [&](const std::string& name) {
      for (std::size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return i;
      throw std::runtime_error(file.string() + ": no column " + name);
    };
    const std::size_t impl = col("impl"), B = col("B"), H = col("H"), N = col("N"), d = col("d"),
                      causal = col("causal"), share = col("share"), read = col("dram_read_bytes");
    while (std::getline(in, line)) {
      const std::vector<std::string> f = csv_fields(line);
      if (f.size() != header.size() || f[impl] != "fa3") continue;
      Row r{std::stoll(f[B]), std::stoll(f[H]), std::stoll(f[N]), std::stoll(f[d]),
            f[causal] == "1", 0, 0, std::stod(f[read])};
      const std::size_t slash = f[share].find('/');
      if (slash != std::string::npos) {
        r.share_num = std::stoll(f[share].substr(0, slash));
        r.share_den = std::stoll(f[share].substr(slash + 1));
      }
      if (r.share_num < 1 || r.share_den < r.share_num ||
          fa3::kMaxKvL2Share * r.share_num % r.share_den != 0)
        throw std::runtime_error(file.string() + ": share " + f[share] +
                                 ": give a/b, 0 < a <= b, a whole percent of the L2");
      rows.push_back(r);
    }
  }
  return rows;
}

// The model's DRAM read for a row: fa3's order with the row's share given explicitly (the
// plan the row ran: each section as many heads as fit), on the H200 profile's grid.
enum class Placement { alternate, scattered, measured };

double predicted(const Row& r, const sim::HardwareProfile& gpu, Placement placement,
                 sim::L2Replacement replacement, bool homes, std::uint64_t seed) {
  const auto share = std::int32_t(fa3::kMaxKvL2Share * r.share_num / r.share_den);
  const fa3::TileOrder order =
      fa3::make_tile_order(r.B, r.H, r.H, r.N, r.N, r.d, 2, r.causal, gpu.l2_bytes, share);
  sim::GridProblem g = sim::on_gpu(gpu, {.N = r.N,
                                         .d = r.d,
                                         .heads = r.B * r.H,
                                         .causal = r.causal ? cpu::Causal::top_left
                                                            : cpu::Causal::none,
                                         .Br = fa3::br(r.d),
                                         .Bc = fa3::kBc,
                                         .blocks_per_sm = 1,
                                         .seed = seed});
  g.order = [order](cpu::Index b) {
    const fa3::WorkItem w = fa3::work_item(order, b);
    return sim::BlockTile{w.b * order.heads_q + w.h, w.tile};
  };
  g.replacement = replacement;  // the placement, replacement and home copies this row asks for
  g.l2_home_copies = homes;
  if (placement == Placement::alternate) g.slot_partitions.clear();
  if (placement == Placement::scattered)
    g.slot_partitions = sim::scattered_partitions(gpu.sm_count, gpu.l2_partitions, seed);
  return double(sim::run_grid(g).dram_read());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fa3's DRAM reads on the H200 beside the grid model's, by placement and replacement"};
  std::string results = "bench/results";
  std::vector<std::uint64_t> seeds{1};
  app.add_option("--results", results, "the folder of measured CSVs")->capture_default_str();
  app.add_option("--seed", seeds, "the scattered placements' (and random choices') seeds")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const sim::HardwareProfile& gpu = sim::find_profile("h200");
    const std::vector<Row> rows = read_rows(results);
    if (rows.empty()) throw std::runtime_error("no fa3 row in " + results + "/*-fa3-sections-dram.csv");
    struct Config {
      const char* name;
      Placement placement;
      sim::L2Replacement replacement;
      bool homes = false;
    };
    using enum sim::L2Replacement;
    const Config configs[] = {{"alternate, LRU", Placement::alternate, lru},
                              {"alternate, sets", Placement::alternate, sets},
                              {"scattered, LRU", Placement::scattered, lru},
                              {"scattered, sets", Placement::scattered, sets},
                              {"measured, LRU", Placement::measured, lru},
                              {"measured, sets", Placement::measured, sets},
                              {"measured, sets, homes", Placement::measured, sets, true}};
    for (const std::uint64_t seed : seeds) {
      fmt::print("seed {}: DRAM read, MiB (measured / predicted)\n", seed);
      fmt::print("{:<30}{:>10}", "B x H, N, d, mask, share", "measured");
      for (const Config& c : configs) fmt::print("{:>26}", c.name);
      fmt::print("\n");
      std::vector<int> within(std::size(configs), 0);
      std::vector<double> worst(std::size(configs), 1.0);
      for (const Row& r : rows) {
        fmt::print("{:<30}{:>10.1f}", fmt::format("{} x {}, {}, {}, {}, {}/{}", r.B, r.H, r.N, r.d,
                                                  r.causal ? "causal" : "none", r.share_num,
                                                  r.share_den),
                   r.read / kMiB);
        for (std::size_t i = 0; i < std::size(configs); ++i) {
          const Config& c = configs[i];
          const double p = predicted(r, gpu, c.placement, c.replacement, c.homes, seed);
          const double ratio = r.read / p;
          within[i] += std::abs(ratio - 1.0) <= kGoal;
          worst[i] = std::max(worst[i], std::max(ratio, 1.0 / ratio));
          fmt::print("{:>26}", fmt::format("{:.1f} ({:.2f})", p / kMiB, ratio));
        }
        fmt::print("\n");
      }
      fmt::print("{:<40}", "within 15%, worst ratio");
      for (std::size_t i = 0; i < std::size(configs); ++i)
        fmt::print("{:>26}", fmt::format("{} of {}, {:.2f}", within[i], rows.size(), worst[i]));
      fmt::print("\n\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fa3_dram_vs_measured: %s\n", e.what());
    return 1;
  }
  return 0;
}

// The simulator's L2 beside the H200's on the simplest write there is: after a read of a clean
// 512 MiB buffer, a fill of X MiB from every SM, then a read of another X MiB
// (bench/gpu/l2_dirty_writes.py; docs/IO-LEVELS.md, "The writes during the kernel"). The
// model runs it through one partition of the H200 profile's L2 (its replacement, its home
// copies, which stand for the other partition's alike traffic), half of each buffer going
// through each partition, as every SM's share does; the DRAM bytes written during the fill
// and during the read are the partition's, doubled. It runs twice: with the dirty cap measured
// on the H200 (sim::kH200MeasuredL2DirtyCap, what a partition holds dirty at most; the h200
// profile leaves it out) and without one.
//
//   ./build/bench/simulator/dirty_writes_vs_measured [--results bench/results]
//       [--only 2026-12-04-h200-l2-dirty-writes] [--home-copies on|off]
#include "measured_csvs.hpp"

#include "flashlab/sim/machine.hpp"
#include "flashlab/sim/profiles.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace flashlab;

namespace {

constexpr sim::Bytes kMiB = sim::Bytes(1) << 20;
constexpr cpu::Index kRowFloats = 16 * 1024;  // the pieces moved: 64 KiB rows of fp32

struct Written {
  double fill_mib = 0, read_after_mib = 0;
};

// The model's DRAM writes during the fill and the read after it, for X MiB, with the measured
// dirty cap or without one.
Written model(const sim::HardwareProfile& h200, bool home_copies, bool dirty_cap,
              sim::Bytes x_mib) {
  const int partitions = h200.l2_partitions;
  sim::Machine m(sim::Machine::kUnbounded, h200.l2_bytes / partitions, h200.l2_replacement,
                 /*seed=*/1, home_copies ? partitions : 1,
                 dirty_cap ? sim::kH200MeasuredL2DirtyCap : 0);
  const auto rows = [&](sim::Bytes mib) {
    return cpu::Index(mib * kMiB / partitions / (4 * kRowFloats));
  };
  // The clean read before the fill: any read larger than the L2 leaves it full of clean lines
  // and nothing else (the program reads 512 MiB; twice the L2 here).
  const sim::Bytes flush_mib = 2 * h200.l2_bytes / kMiB;
  const auto flush = m.add_tensor("flush", rows(flush_mib), kRowFloats, sim::DType::fp32);
  const auto fill = m.add_tensor("fill", rows(x_mib), kRowFloats, sim::DType::fp32);
  const auto other = m.add_tensor("other", rows(x_mib), kRowFloats, sim::DType::fp32);
  const auto written = [&] {
    sim::Bytes b = 0;
    for (const auto& t : m.traffic()) b += t.dram_written;
    return double(b * partitions) / double(kMiB);
  };
  const sim::Bytes row_bytes = 4 * kRowFloats;
  for (cpu::Index r = 0; r < rows(flush_mib); ++r) m.read_through(flush, r, row_bytes);
  const double before = written();
  for (cpu::Index r = 0; r < rows(x_mib); ++r) m.write_through(fill, r, row_bytes);
  const double after_fill = written();
  for (cpu::Index r = 0; r < rows(x_mib); ++r) m.read_through(other, r, row_bytes);
  return {after_fill - before, written() - after_fill};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The simulator's L2 beside the H200's on a fill and a read after it"};
  std::string results = "bench/results", only = "2026-12-04-h200-l2-dirty-writes";
  std::string homes = "on";
  app.add_option("--results", results, "the folder of measured CSVs")->capture_default_str();
  app.add_option("--only", only, "the CSVs whose file name contains this")->capture_default_str();
  app.add_option("--home-copies", homes, "the L2's home copies: on (the H200 profile's) or off")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const auto& h200 = sim::find_profile("h200");
    const bool home_copies = homes == "on" && h200.l2_home_copies;
    // The measured rows, by size: what the fill and the read after it wrote.
    std::map<sim::Bytes, std::vector<Written>> measured;
    for (const auto& path : bench::measured_csvs(results, only)) {
      std::ifstream in(path);
      std::string line;
      std::getline(in, line);
      if (line != "mib,kernel,dram_written_bytes,dram_read_bytes,time_ns")
        throw std::runtime_error(path.string() + ": not l2_dirty_writes.py's CSV (header " + line +
                                 ")");
      std::map<sim::Bytes, Written> rows;
      while (std::getline(in, line)) {
        const auto f = bench::csv_fields(line);
        if (f.size() != 5) throw std::runtime_error(path.string() + ": a line of " + line);
        const sim::Bytes mib = std::stoll(f[0]);
        const double written = std::stod(f[2]) / double(kMiB);
        (f[1] == "fill" ? rows[mib].fill_mib : rows[mib].read_after_mib) = written;
      }
      for (const auto& [mib, w] : rows) measured[mib].push_back(w);
    }
    if (measured.empty())
      throw std::runtime_error("no CSV in " + results + " whose name contains " + only +
                               ": give --results and --only the measured runs");
    fmt::print(
        "The model: one of the H200 profile's {} L2 partitions ({}, home copies {}), with the "
        "measured dirty cap of {:.2f} MiB a partition and without one; MiB written to DRAM\n\n",
        h200.l2_partitions, sim::to_string(h200.l2_replacement), home_copies ? "on" : "off",
        double(sim::kH200MeasuredL2DirtyCap) / double(kMiB));
    fmt::print(
        "| X (MiB) | fill: measured | model | without cap | read after: measured | model | "
        "without cap |\n");
    fmt::print("|---|---|---|---|---|---|---|\n");
    for (const auto& [mib, runs] : measured) {
      const Written p = model(h200, home_copies, /*dirty_cap=*/true, mib);
      const Written uncapped = model(h200, home_copies, /*dirty_cap=*/false, mib);
      std::string fill, read_after;
      for (const auto& w : runs) {
        fill += (fill.empty() ? "" : " / ") + fmt::format("{:.2f}", w.fill_mib);
        read_after += (read_after.empty() ? "" : " / ") + fmt::format("{:.2f}", w.read_after_mib);
      }
      fmt::print("| {} | {} | {:.2f} | {:.2f} | {} | {:.2f} | {:.2f} |\n", mib, fill, p.fill_mib,
                 uncapped.fill_mib, read_after, p.read_after_mib, uncapped.read_after_mib);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dirty_writes_vs_measured: %s\n", e.what());
    return 1;
  }
  return 0;
}

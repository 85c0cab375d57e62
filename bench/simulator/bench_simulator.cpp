// How long the simulator takes: count-only mode (the loops and transfers alone) against
// full runs (the numerics too, on random inputs), for naive, FA1 and FA2.
//
//   ./build/bench/simulator/bench_simulator                 # the table of bench/RESULTS.md
//   ./build/bench/simulator/bench_simulator --n 8192 --full-max-n 8192
//   ./build/bench/simulator/bench_simulator --n 1048576 --d 64 --l2 60MiB --full-max-n 0
//
// With --l2, the count-only runs go through an L2 of that size and the table adds the bytes
// that reach DRAM past it.
// Count-only runs are repeated and the median kept. A full run costs the numerics, about
// 4 N^2 d FLOPs on this CPU (and N^2 memory for naive), so it runs only up to --full-max-n
// (naive only up to --naive-full-max-n); larger N are marked "not run".
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <random>
#include <vector>

using namespace flashlab;

namespace {

using Clock = std::chrono::steady_clock;

template <class Work>
double median_seconds(int repeats, Work&& work) {
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    work();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string format_seconds(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

cpu::Matrix<cpu::bf16> random_bf16(cpu::Index rows, cpu::Index cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  cpu::Matrix<float> X(rows, cols);
  for (cpu::Index k = 0; k < X.size(); ++k) X.data()[k] = normal(rng);
  return X.cast<cpu::bf16>();
}

struct Options {
  std::vector<cpu::Index> Ns = {1024, 8192, 65536, 1048576};
  cpu::Index d = 128, full_max_n = 8192, naive_full_max_n = 8192;
  std::string sram = "192KiB";
  std::string l2;  // none when empty
  int repeats = 5;
};

void print_table(const Options& o) {
  std::mt19937 rng(std::random_device{}());
  const sim::Bytes sram_bytes = sim::parse_bytes(o.sram);
  const sim::Bytes l2_bytes = o.l2.empty() ? 0 : sim::parse_bytes(o.l2);
  fmt::print("| N | program | Br x Bc | HBM bytes |{} count-only | full |\n|---|---|---|---|{}---|---|\n",
             l2_bytes ? " DRAM bytes past the L2 |" : "", l2_bytes ? "---|" : "");
  for (const cpu::Index N : o.Ns) {
    sim::Problem p;
    p.N = N;
    p.d = o.d;
    p.dtype = sim::DType::bf16;
    p.sram_bytes = sram_bytes;
    p.l2_bytes = l2_bytes;
    const bool any_full = N <= std::max(o.full_max_n, o.naive_full_max_n);
    cpu::Matrix<cpu::bf16> Q, K, V;
    if (any_full) Q = random_bf16(N, o.d, rng), K = random_bf16(N, o.d, rng), V = random_bf16(N, o.d, rng);
    for (const sim::Algorithm a : {sim::Algorithm::naive, sim::Algorithm::fa1, sim::Algorithm::fa2}) {
      sim::Report report;
      const double count_s = median_seconds(o.repeats, [&] { report = sim::count(a, p); });
      const cpu::Index limit = a == sim::Algorithm::naive ? o.naive_full_max_n : o.full_max_n;
      std::string full = "not run";
      if (N <= limit)
        full = format_seconds(median_seconds(1, [&] { sim::simulate<cpu::bf16>(a, p, Q, K, V); }));
      const std::string dram =
          l2_bytes ? fmt::format(" {} |", sim::format_bytes(double(report.dram_total()))) : "";
      fmt::print("| {} | {} | {} | {} |{} {} | {} |\n", N, sim::to_string(a),
                 report.tiles ? fmt::format("{} x {}", report.tiles->tiles.Br, report.tiles->tiles.Bc) : "-",
                 sim::format_bytes(double(report.bytes_total())), dram, format_seconds(count_s),
                 full);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times the simulator's count-only and full runs"};
  // CLI::PositiveNumber and NonNegativeNumber would print their bounds as doubles, 300
  // digits long.
  const CLI::Range kAtLeastOne(1, std::numeric_limits<int>::max());
  const CLI::Range kAtLeastZero(0, std::numeric_limits<int>::max());
  Options o;
  app.add_option("--n", o.Ns, "sequence lengths")->capture_default_str()->check(kAtLeastOne);
  app.add_option("--d", o.d, "head dimension")->capture_default_str()->check(kAtLeastOne);
  app.add_option("--sram", o.sram, "SRAM size")->capture_default_str();
  app.add_option("--l2", o.l2, "an L2 of this size between HBM and SRAM (default: none)");
  app.add_option("--repeats", o.repeats, "count-only repetitions (median kept)")
      ->capture_default_str()->check(kAtLeastOne);
  app.add_option("--full-max-n", o.full_max_n, "largest N for full runs of fa1, fa2")
      ->capture_default_str()->check(kAtLeastZero);
  app.add_option("--naive-full-max-n", o.naive_full_max_n, "largest N for full naive runs")
      ->capture_default_str()->check(kAtLeastZero);
  CLI11_PARSE(app, argc, argv);
  try {
    print_table(o);
  } catch (const std::exception& e) {  // a bad --sram, or an N or d the simulator refuses
    fmt::print(stderr, "bench_simulator: {}\n", e.what());
    return 1;
  }
  return 0;
}

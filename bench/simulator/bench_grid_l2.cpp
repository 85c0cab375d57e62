// How long the grid model takes (flashlab/sim/grid.hpp), and what it predicts: fa2's grid on
// the H200 (132 SMs, 2 blocks each, 60 MiB L2 in 2 partitions, Br 128, Bc 64 at d = 128)
// over N and heads, with the DRAM bytes read, written during the kernel and left dirty,
// and the crossover.
//
//   ./build/bench/simulator/bench_grid_l2                       # N = 4096 .. 262144, 16 heads
//   ./build/bench/simulator/bench_grid_l2 --heads 1 16 64 --n 65536 131072 262144
//   ./build/bench/simulator/bench_grid_l2 --partitions 1         # one pool of 60 MiB
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <limits>
#include <vector>

using namespace flashlab;

namespace {

struct Options {
  std::vector<cpu::Index> Ns = {4096, 16384, 32768, 65536, 131072, 262144};
  std::vector<cpu::Index> heads = {16};
  cpu::Index d = 128, Br = 128, Bc = 64, blocks_per_sm = 2, kv_heads = 0;
  bool causal = false;
  std::string l2;      // the profile's when empty
  int partitions = 0;  // the profile's when 0
};

std::string mib(sim::Bytes b) { return sim::format_bytes(double(b)); }

void print_table(const Options& o) {
  const sim::HardwareProfile& h200 = sim::find_profile("h200");
  const sim::Bytes l2_bytes = o.l2.empty() ? h200.l2_bytes : sim::parse_bytes(o.l2);
  fmt::print(
      "| heads | N | DRAM read | DRAM written | left dirty | K+V once | L2 accesses | "
      "time |\n|---|---|---|---|---|---|---|---|\n");
  for (const cpu::Index heads : o.heads) {
    sim::GridProblem p{.d = o.d,
                       .heads = heads,
                       .kv_heads = o.kv_heads,
                       .causal = o.causal ? cpu::Causal::top_left : cpu::Causal::none,
                       .Br = o.Br,
                       .Bc = o.Bc,
                       .blocks_per_sm = o.blocks_per_sm,
                       .sm_count = h200.sm_count,
                       .l2_bytes = l2_bytes,
                       .l2_partitions = o.partitions > 0 ? o.partitions : h200.l2_partitions};
    for (const cpu::Index N : o.Ns) {
      p.N = N;
      const auto start = std::chrono::steady_clock::now();
      const sim::GridReport r = sim::run_grid(p);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print("| {} | {} | {} | {} | {} | {} | {} | {:.3f} s |\n", heads, N, mib(r.dram_read()),
                 mib(r.dram_written()), mib(r.left_dirty()),
                 mib(2 * p.kv_head_count() * N * o.d * 2), r.l2_accesses, s);
      std::fflush(stdout);
    }
    if (!o.causal)
      if (const auto c = sim::l2_crossover(p))
        fmt::print(
            "crossover at {} heads: from N = {} ({} KV heads live, {}); every wave from {}\n",
            heads, c->first_N, c->heads_live, mib(c->live), c->one_head_N);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times the grid model through the H200's shared L2 and prints its predictions"};
  const CLI::Range kAtLeastOne(1, std::numeric_limits<int>::max());
  Options o;
  app.add_option("--n", o.Ns, "sequence lengths")->capture_default_str()->check(kAtLeastOne);
  app.add_option("--heads", o.heads, "heads (batch 1)")->capture_default_str()->check(kAtLeastOne);
  app.add_option("--kv-heads", o.kv_heads, "KV heads (GQA, MQA); 0: as many as heads")
      ->capture_default_str();
  app.add_option("--d", o.d, "head dimension")->capture_default_str()->check(kAtLeastOne);
  app.add_option("--br", o.Br, "query rows per block")->capture_default_str()->check(kAtLeastOne);
  app.add_option("--bc", o.Bc, "keys per K/V tile")->capture_default_str()->check(kAtLeastOne);
  app.add_option("--blocks-per-sm", o.blocks_per_sm, "resident blocks per SM")
      ->capture_default_str()
      ->check(kAtLeastOne);
  app.add_option("--l2", o.l2, "the L2's capacity (default: the H200's 60 MiB)");
  app.add_option("--partitions", o.partitions,
                 "the L2's partitions, K and V held in each (default: the H200's 2)")
      ->check(kAtLeastOne);
  app.add_flag("--causal", o.causal, "causal (top-left): every block's accesses one by one");
  CLI11_PARSE(app, argc, argv);
  try {
    print_table(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_grid_l2: {}\n", e.what());
    return 2;
  }
  return 0;
}

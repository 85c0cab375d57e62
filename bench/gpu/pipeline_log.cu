// bench_pipeline_log: fa3's pipeline as its blocks ran it, step by step: for each logged block,
// when the producer issued each copy and when each consumer warpgroup had its data, took its
// ping-pong turn, issued S_j, saw it land, finished its softmax, saw U += W V land and wrote
// O (gpu/kernels/pipeline_log.cuh lists the events). It is lesson 8's timeline read off the
// kernel itself, and it takes a work item's fixed cost apart: where, at N = 1,024, an item
// costs about two KV tiles' time more than its tiles (bench/gpu/NOTES.md).
//
// The kernel is the library's own source (gpu/kernels/06_fa3.cu) built with its log on, run
// with fa3's default options, or with --stages, --ping-pong, --overlap-items, --grid given, on
// random bf16 inputs: a warm-up call, then one logged call.
//
//   bench_pipeline_log --batch 16 --heads 16 --n 1024 --d 128 [--causal] [--blocks 132] \
//       [--grid persistent|queue|per-tile] \
//       --csv log.csv
//
// The CSV has a row per entry: block, sm, role (producer, consumer0, ...), event, item, j,
// t_ns, the time from the block's start, converted from the SM's cycles by the block's own
// %globaltimer and %clock64 at its start and end, and block_start_ns, when the block started
// after the earliest logged block (the GPU's one %globaltimer: blocks need not start
// together). bench/gpu/pipeline_log.py reads it.
#define FLASHLAB_WITH_PIPELINE_LOG
#include "../../gpu/kernels/06_fa3.cu"
#include "../../gpu/kernels/hopper/tma_host.cu"

#include "bench_device.cuh"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using flashlab::bench::check_cuda;
using flashlab::bench::device_array;
using flashlab::bench::fill;
namespace plog = flashlab::gpu::pipeline_log;

// Blocks logged at most: each takes kRoles x kCapacity entries of 16 bytes (1 MiB), so 528,
// four an SM of the H200, take 528 MiB of the GPU's memory.
constexpr int kMaxLoggedBlocks = 528;

std::string role_name(int role) {
  return role == 0 ? std::string("producer") : fmt::format("consumer{}", role - 1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fa3's pipeline step by step: each role's events in the logged blocks"};
  int batch = 16, heads = 16, n = 1024, d = 128, blocks = 132;
  int stages = FLASHLAB_FA3_AUTO, ping_pong = FLASHLAB_FA3_AUTO, overlap_items = -1;
  bool causal = false;
  std::string grid = "auto";
  std::string csv_path;
  app.add_option("--batch", batch, "sequences")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--heads", heads, "query heads (as many KV heads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--n", n, "queries and keys per head")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--d", d, "the head dimension")
      ->capture_default_str()
      ->check(CLI::IsMember({64, 128}));
  app.add_flag("--causal", causal, "the causal mask (top-left: N_q = N_k)");
  app.add_option("--blocks", blocks, "blocks logged: the first this many of the grid")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxLoggedBlocks));
  app.add_option("--stages", stages,
                 "K and V buffers (1 to fa3::max_stages: 4 at d = 64, 3 at d = 128; default: "
                 "fa3's for d)")
      ->check(CLI::Range(1, flashlab::gpu::fa3::kMaxStages));
  app.add_option("--ping-pong", ping_pong, "0 or 1 (default: fa3's for d)")
      ->check(CLI::Range(0, 1));
  app.add_option("--overlap-items", overlap_items, "0 or 1 (default: fa3's)")
      ->check(CLI::Range(0, 1));
  // --grid's names and the flashlab_fa3_grid each stands for, in the order --help lists them.
  const std::vector<std::pair<std::string, flashlab_fa3_grid>> grids{
      {"auto", FLASHLAB_FA3_GRID_AUTO},
      {"persistent", FLASHLAB_FA3_GRID_PERSISTENT},
      {"queue", FLASHLAB_FA3_GRID_QUEUE},
      {"per-tile", FLASHLAB_FA3_GRID_PER_TILE}};
  std::vector<std::string> grid_names;
  for (const auto& [name, value] : grids) grid_names.push_back(name);
  app.add_option("--grid", grid, "auto (fa3's for the shape), persistent, queue or per-tile")
      ->capture_default_str()
      ->check(CLI::IsMember(grid_names));
  app.add_option("--csv", csv_path, "write the entries here")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    std::ofstream out(csv_path);
    if (!out) throw std::runtime_error("cannot write " + csv_path + ": give a writable --csv path");
    const int most_stages = flashlab::gpu::fa3::max_stages(d, FLASHLAB_BF16);
    if (stages > most_stages)
      throw std::runtime_error("--stages " + std::to_string(stages) +
                               ": at d = " + std::to_string(d) + " a block's SRAM holds 1 to " +
                               std::to_string(most_stages) + " stages");
    const int64_t elems = int64_t(batch) * heads * n * d;
    auto* q = device_array<__nv_bfloat16>(elems, "Q");
    auto* k = device_array<__nv_bfloat16>(elems, "K");
    auto* v = device_array<__nv_bfloat16>(elems, "V");
    auto* o = device_array<__nv_bfloat16>(elems, "O");
    auto* lse = device_array<float>(int64_t(batch) * heads * n, "LSE");
    fill<<<1024, 256>>>(q, elems, 1);
    fill<<<1024, 256>>>(k, elems, 2);
    fill<<<1024, 256>>>(v, elems, 3);
    check_cuda(cudaGetLastError(), "fill");

    flashlab::gpu::Problem p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
    const flashlab::gpu::Strides s{int64_t(heads) * n * d, int64_t(n) * d, d};
    p.q_stride = p.k_stride = p.v_stride = p.o_stride = s;
    p.batch = batch, p.heads_q = p.heads_kv = heads, p.n_q = p.n_k = n, p.d = d;
    p.scale = 1.0f / std::sqrt(float(d));
    p.causal = causal;
    p.dtype = FLASHLAB_BF16;
    flashlab_fa3_options options = flashlab::gpu::fa3::default_options();
    options.stages = stages;
    options.ping_pong = ping_pong;
    if (overlap_items >= 0) options.overlap_items = overlap_items;
    for (const auto& [name, value] : grids)
      if (name == grid) options.grid = value;
    options = flashlab::gpu::fa3::resolve_options(d, options);

    const size_t entries = size_t(blocks) * plog::kRoles * plog::kCapacity;
    auto* entry_array = device_array<plog::Entry>(int64_t(entries), "the pipeline log");
    auto* block_array = device_array<plog::Block>(blocks, "the blocks' clocks");
    check_cuda(cudaMemset(entry_array, 0, entries * sizeof(plog::Entry)), "clear");
    check_cuda(cudaMemset(block_array, 0, size_t(blocks) * sizeof(plog::Block)), "clear");
    // A call's time by CUDA events, so that what the log costs is known: the median of five
    // calls with the log off (compiled in, writing nothing), beside the logged call.
    cudaEvent_t begin, end;
    check_cuda(cudaEventCreate(&begin), "event");
    check_cuda(cudaEventCreate(&end), "event");
    const auto timed_call = [&] {
      check_cuda(cudaEventRecord(begin), "event");
      flashlab::gpu::launch_fa3(p, options, nullptr);
      check_cuda(cudaEventRecord(end), "event");
      check_cuda(cudaEventSynchronize(end), "the call");
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, begin, end), "event");
      return 1000.0 * ms;
    };
    timed_call();  // the warm-up
    std::vector<double> unlogged;
    for (int i = 0; i < 5; ++i) unlogged.push_back(timed_call());
    std::sort(unlogged.begin(), unlogged.end());
    check_cuda(cudaMemcpyToSymbol(plog::g_entries, &entry_array, sizeof entry_array), "log on");
    check_cuda(cudaMemcpyToSymbol(plog::g_blocks, &block_array, sizeof block_array), "log on");
    check_cuda(cudaMemcpyToSymbol(plog::g_logged_blocks, &blocks, sizeof blocks), "log on");
    const double logged_us = timed_call();

    std::vector<plog::Entry> host(entries);
    std::vector<plog::Block> host_blocks(static_cast<size_t>(blocks));
    check_cuda(
        cudaMemcpy(host.data(), entry_array, entries * sizeof(plog::Entry), cudaMemcpyDeviceToHost),
        "the log");
    check_cuda(cudaMemcpy(host_blocks.data(), block_array, host_blocks.size() * sizeof(plog::Block),
                          cudaMemcpyDeviceToHost),
               "the blocks' clocks");

    out << "batch,heads,N,d,causal,stages,ping_pong,overlap_items,"
           "block,sm,role,event,item,j,t_ns,block_start_ns\n";
    uint64_t earliest_start = UINT64_MAX;
    for (const plog::Block& blk : host_blocks)
      if (blk.clock_end != 0) earliest_start = std::min(earliest_start, blk.globaltimer_begin);
    int64_t written = 0, dropped = 0;
    for (int b = 0; b < blocks; ++b) {
      const plog::Block& blk = host_blocks[size_t(b)];
      if (blk.clock_end == 0) continue;  // a block the grid did not have
      dropped += blk.dropped;
      const double ns_per_cycle = double(blk.globaltimer_end - blk.globaltimer_begin) /
                                  double(blk.clock_end - blk.clock_begin);
      for (int role = 0; role < plog::kRoles; ++role) {
        const plog::Entry* e =
            host.data() + (size_t(b) * plog::kRoles + size_t(role)) * plog::kCapacity;
        for (int i = 0; i < plog::kCapacity && e[i].clock != 0; ++i) {
          out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.1f},{}\n", batch, heads,
                             n, d, int(causal), options.stages, options.ping_pong,
                             options.overlap_items, b, blk.sm, role_name(role),
                             plog::kEventNames[e[i].event], e[i].item, e[i].j,
                             double(int64_t(e[i].clock - blk.clock_begin)) * ns_per_cycle,
                             blk.globaltimer_begin - earliest_start);
          ++written;
        }
      }
    }
    if (dropped > 0)
      throw std::runtime_error(
          fmt::format("{} entries did not fit the log's {} a role: log fewer or shorter items",
                      dropped, plog::kCapacity));
    std::printf(
        "%lld entries from %d blocks; the call %.1f us logged, %.1f us with the log off "
        "(median of 5)\n",
        static_cast<long long>(written), blocks, logged_us, unlogged[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pipeline_log: %s\n", e.what());
    return 1;
  }
  return 0;
}

// What the block-log programs share (bench_block_log: fa2; bench_scalar_block_log: the scalar
// kernel; bench_backward_block_log: the backward's main kernel, with a program of its own over
// log_calls): their options, the problem on random bf16 inputs, and the logged calls. Each
// program defines FLASHLAB_BLOCK_LOG and includes its kernel's source (the library's own),
// whose FLASHLAB_BLOCK_LOG_BEGIN and _END (gpu/kernels/block_log.cuh) write each block's SM and
// its start and end; then it hands run_block_log its launch and its grid's facts.
//
// A warm-up call, then each logged call between cudaProfilerStart and Stop, so that Nsight
// Compute (`--profile-from-start off`) reads the bytes of exactly the calls logged
// (bench/gpu/block_log.py runs both and joins them). The CSV has a row per block and call: N,
// d, dtype, heads, call, block (the grid model's block id: head x Tr + blockIdx.x), head,
// tile (the query tile it ran), sm, start_ns and end_ns (from the call's first start), causal.
// With --steps-csv, for a kernel whose loop logs its steps (FLASHLAB_BLOCK_LOG_STEP), a second
// CSV has a row per step a block began: N, heads, causal, call, block, step, start_ns (on the
// same clock as the blocks').
#pragma once

#include "bench_device.cuh"
#include "block_log.cuh"
#include "launch.hpp"

#include <CLI/CLI.hpp>
#include <cuda_profiler_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <utility>
#include <string>
#include <vector>

namespace flashlab::bench {

// The kernel a program logs: its name in messages and the facts of its grid.
struct LoggedKernel {
  const char* program;        // "bench_block_log"
  const char* description;    // the program's --help line
  int64_t Br;                 // query rows a block
  bool causal_longest_first;  // under the mask block x runs tile Tr - 1 - x (else x)
  int64_t Bc = 0;             // keys a step where the kernel's loop logs its steps; 0: it does not
};

// The options every block-log program takes.
struct LogOptions {
  int heads = 16, kv_heads = 0, n = 65536, d = 128, calls = 1;  // kv_heads 0: as many as heads
  bool causal = false;
  std::string csv_path, steps_path;
};

// Adds the options to `app` (--kv-heads where `gqa`).
inline void add_log_options(CLI::App& app, LogOptions& o, bool gqa) {
  app.add_option("--heads", o.heads,
                 gqa ? "query heads, B = 1" : "query heads (as many KV heads), B = 1")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  if (gqa)
    app.add_option("--kv-heads", o.kv_heads, "KV heads, dividing --heads (default: as many)")
        ->check(CLI::Range(1, 1024));
  app.add_option("--n", o.n, "queries and keys per head")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 22));
  app.add_option("--d", o.d, "the head dimension")
      ->capture_default_str()
      ->check(CLI::IsMember({64, 128}));
  app.add_option("--calls", o.calls, "logged calls after the warm-up")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_flag("--causal", o.causal, "the causal mask (top-left: N_q = N)");
  app.add_option("--csv", o.csv_path, "write the blocks here")->required();
  app.add_option("--steps-csv", o.steps_path,
                 "also write when each block began each step here (a step log)");
}

// A logged launch's grid: its blocks, by linear id (x + gridDim.x (y + gridDim.y z), the grid
// model's block order), the head and tile each owns, and the most steps a block takes where
// its loop logs them (0: no step log).
struct LogGrid {
  int64_t blocks = 0;
  uint32_t step_capacity = 0;
  std::function<std::pair<int64_t, int64_t>(int64_t)> head_and_tile;
};

// The warm-up call (not logged), then `calls` logged ones, each between cudaProfilerStart and
// Stop. A row a block and call into `out`: `row_head`'s fields, then call, block, head, tile,
// sm, start_ns, end_ns, then `row_tail`'s; where the grid logs steps, a row a step a block
// began into `steps_out`: `step_head`'s fields, then call, block, step, start_ns. `prepare`
// runs before each call, outside the profiled range (the backward's: its dQ accumulator zeroed).
template <class Launch>
void log_calls(
    int calls, const LogGrid& grid, Launch launch, std::ostream& out, std::ostream& steps_out,
    const std::string& row_head, const std::string& row_tail, const std::string& step_head,
    const std::function<void()>& prepare = [] {}) {
  namespace block_log = gpu::block_log;
  const int64_t blocks = grid.blocks;
  auto* entries = device_array<block_log::Entry>(blocks, "the block log");
  std::vector<block_log::Entry> host(static_cast<std::size_t>(blocks));
  block_log::Entry* none = nullptr;
  check_cuda(cudaMemcpyToSymbol(block_log::g_entries, &none, sizeof none), "log off");
  const uint32_t capacity = grid.step_capacity;
  const std::size_t step_count = std::size_t(blocks) * capacity;
  uint64_t* steps =
      capacity > 0 ? device_array<uint64_t>(int64_t(step_count), "the step log") : nullptr;
  std::vector<uint64_t> host_steps(step_count);
  uint64_t* no_steps = nullptr;
  check_cuda(cudaMemcpyToSymbol(block_log::g_steps, &no_steps, sizeof no_steps), "steps off");
  prepare();
  launch();  // the warm-up, not logged
  check_cuda(cudaDeviceSynchronize(), "warm-up");
  check_cuda(cudaMemcpyToSymbol(block_log::g_entries, &entries, sizeof entries), "log on");
  check_cuda(cudaMemcpyToSymbol(block_log::g_steps, &steps, sizeof steps), "steps on");
  check_cuda(cudaMemcpyToSymbol(block_log::g_step_capacity, &capacity, sizeof capacity),
             "step capacity");
  for (int call = 0; call < calls; ++call) {
    check_cuda(cudaMemset(entries, 0, std::size_t(blocks) * sizeof(block_log::Entry)), "clear");
    if (steps) check_cuda(cudaMemset(steps, 0, step_count * sizeof(uint64_t)), "clear steps");
    prepare();
    check_cuda(cudaDeviceSynchronize(), "clear");
    check_cuda(cudaProfilerStart(), "cudaProfilerStart");
    launch();
    check_cuda(cudaDeviceSynchronize(), "the logged call");
    check_cuda(cudaProfilerStop(), "cudaProfilerStop");
    check_cuda(cudaMemcpy(host.data(), entries, host.size() * sizeof(block_log::Entry),
                          cudaMemcpyDeviceToHost),
               "the log");
    if (steps)
      check_cuda(cudaMemcpy(host_steps.data(), steps, step_count * sizeof(uint64_t),
                            cudaMemcpyDeviceToHost),
                 "the step log");
    uint64_t t0 = UINT64_MAX, last_end = 0;  // the call's first start and last end
    for (const auto& e : host) t0 = std::min(t0, e.start), last_end = std::max(last_end, e.end);
    // A block's steps in order, each one it began (the ones past its work stay 0).
    for (std::size_t k = 0; k < step_count; ++k)
      if (host_steps[k] != 0)
        steps_out << fmt::format("{},{},{},{},{}\n", step_head, call, k / capacity, k % capacity,
                                 host_steps[k] - t0);
    for (int64_t b = 0; b < blocks; ++b) {
      const auto& e = host[std::size_t(b)];
      if (e.end == 0) throw std::runtime_error(fmt::format("block {} left no entry", b));
      const auto [head, tile] = grid.head_and_tile(b);
      out << fmt::format("{},{},{},{},{},{},{},{},{}\n", row_head, call, b, head, tile, e.sm,
                         e.start - t0, e.end - t0, row_tail);
    }
    std::printf("call %d: %lld blocks, %.1f us\n", call, static_cast<long long>(blocks),
                double(last_end - t0) / 1000.0);
  }
}

// Opens the CSVs a program writes: the blocks', and the steps' where asked for.
inline void open_logs(const LogOptions& o, std::ofstream& out, std::ofstream& steps_out) {
  out.open(o.csv_path);
  if (!out) throw std::runtime_error("cannot write " + o.csv_path + ": give a writable --csv path");
  if (o.steps_path.empty()) return;
  steps_out.open(o.steps_path);
  if (!steps_out)
    throw std::runtime_error("cannot write " + o.steps_path + ": give a writable --steps-csv path");
}

// Parses the options, runs the kernel's calls with the log on, writes the CSV; the program's
// exit status.
template <class Launch>
int run_block_log(int argc, char** argv, const LoggedKernel& kernel, Launch launch) {
  CLI::App app{kernel.description};
  LogOptions o;
  add_log_options(app, o, /*gqa=*/false);
  CLI11_PARSE(app, argc, argv);
  if (!o.steps_path.empty() && kernel.Bc == 0) {
    std::fprintf(stderr, "%s: --steps-csv: this kernel's loop does not log its steps\n",
                 kernel.program);
    return 1;
  }
  try {
    std::ofstream out, steps_out;
    open_logs(o, out, steps_out);
    const int heads = o.heads, n = o.n, d = o.d;
    const int64_t elems = int64_t(heads) * n * d;
    auto* q = device_array<__nv_bfloat16>(elems, "Q");
    auto* k = device_array<__nv_bfloat16>(elems, "K");
    auto* v = device_array<__nv_bfloat16>(elems, "V");
    auto* o_out = device_array<__nv_bfloat16>(elems, "O");
    auto* lse = device_array<float>(int64_t(heads) * n, "LSE");
    fill<<<1024, 256>>>(q, elems, 1);
    fill<<<1024, 256>>>(k, elems, 2);
    fill<<<1024, 256>>>(v, elems, 3);
    check_cuda(cudaGetLastError(), "fill");

    gpu::Problem p;
    p.q = q, p.k = k, p.v = v, p.o = o_out, p.lse = lse;
    const gpu::Strides s{int64_t(heads) * n * d, int64_t(n) * d, d};
    p.q_stride = p.k_stride = p.v_stride = p.o_stride = s;
    p.batch = 1, p.heads_q = p.heads_kv = heads, p.n_q = p.n_k = n, p.d = d;
    p.scale = 1.0f / std::sqrt(float(d));
    p.dtype = FLASHLAB_BF16;
    p.causal = o.causal;

    const int64_t tr = (n + kernel.Br - 1) / kernel.Br;
    // The query tile block x of a head runs.
    const auto tile_of = [&](int64_t x) {
      return o.causal && kernel.causal_longest_first ? tr - 1 - x : x;
    };
    // The step log: a row of `capacity` starts a block (every key tile), where asked for.
    const LogGrid grid{tr * heads,
                       o.steps_path.empty() ? 0u : uint32_t((n + kernel.Bc - 1) / kernel.Bc),
                       [&](int64_t b) {
                         return std::pair{b / tr, tile_of(b % tr)};
                       }};
    if (grid.step_capacity > 0) steps_out << "N,heads,causal,call,block,step,start_ns\n";
    out << "N,d,dtype,heads,call,block,head,tile,sm,start_ns,end_ns,causal\n";
    log_calls(
        o.calls, grid, [&] { launch(p); }, out, steps_out,
        fmt::format("{},{},bf16,{}", n, d, heads), fmt::format("{}", int(o.causal)),
        fmt::format("{},{},{}", n, heads, int(o.causal)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kernel.program, e.what());
    return 1;
  }
  return 0;
}

}  // namespace flashlab::bench

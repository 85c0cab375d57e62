// What the block-log programs share (bench_block_log: fa2; bench_scalar_block_log: the scalar
// kernel): their options, the problem on random bf16 inputs, and the logged calls. Each
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

// Parses the options, runs the kernel's calls with the log on, writes the CSV; the program's
// exit status.
template <class Launch>
int run_block_log(int argc, char** argv, const LoggedKernel& kernel, Launch launch) {
  CLI::App app{kernel.description};
  int heads = 16, n = 65536, d = 128, calls = 1;
  bool causal = false;
  std::string csv_path;
  app.add_option("--heads", heads, "query heads (as many KV heads), B = 1")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--n", n, "queries and keys per head")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 22));
  app.add_option("--d", d, "the head dimension")
      ->capture_default_str()
      ->check(CLI::IsMember({64, 128}));
  app.add_option("--calls", calls, "logged calls after the warm-up")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_flag("--causal", causal, "the causal mask (top-left: N_q = N)");
  app.add_option("--csv", csv_path, "write the blocks here")->required();
  std::string steps_path;
  app.add_option("--steps-csv", steps_path,
                 "also write when each block began each step here (a step log)");
  CLI11_PARSE(app, argc, argv);
  if (!steps_path.empty() && kernel.Bc == 0) {
    std::fprintf(stderr, "%s: --steps-csv: this kernel's loop does not log its steps\n",
                 kernel.program);
    return 1;
  }
  namespace block_log = gpu::block_log;
  try {
    std::ofstream out(csv_path);
    if (!out) throw std::runtime_error("cannot write " + csv_path + ": give a writable --csv path");
    std::ofstream steps_out;
    if (!steps_path.empty()) {
      steps_out.open(steps_path);
      if (!steps_out)
        throw std::runtime_error("cannot write " + steps_path +
                                 ": give a writable --steps-csv path");
    }
    const int64_t elems = int64_t(heads) * n * d;
    auto* q = device_array<__nv_bfloat16>(elems, "Q");
    auto* k = device_array<__nv_bfloat16>(elems, "K");
    auto* v = device_array<__nv_bfloat16>(elems, "V");
    auto* o = device_array<__nv_bfloat16>(elems, "O");
    auto* lse = device_array<float>(int64_t(heads) * n, "LSE");
    fill<<<1024, 256>>>(q, elems, 1);
    fill<<<1024, 256>>>(k, elems, 2);
    fill<<<1024, 256>>>(v, elems, 3);
    check_cuda(cudaGetLastError(), "fill");

    gpu::Problem p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
    const gpu::Strides s{int64_t(heads) * n * d, int64_t(n) * d, d};
    p.q_stride = p.k_stride = p.v_stride = p.o_stride = s;
    p.batch = 1, p.heads_q = p.heads_kv = heads, p.n_q = p.n_k = n, p.d = d;
    p.scale = 1.0f / std::sqrt(float(d));
    p.dtype = FLASHLAB_BF16;
    p.causal = causal;

    const int64_t tr = (n + kernel.Br - 1) / kernel.Br;
    const int64_t blocks = tr * heads;
    // The query tile block x of a head runs.
    const auto tile_of = [&](int64_t x) {
      return causal && kernel.causal_longest_first ? tr - 1 - x : x;
    };
    auto* entries = device_array<block_log::Entry>(blocks, "the block log");
    std::vector<block_log::Entry> host(static_cast<std::size_t>(blocks));
    block_log::Entry* none = nullptr;
    check_cuda(cudaMemcpyToSymbol(block_log::g_entries, &none, sizeof none), "log off");
    // The step log: a row of `capacity` starts a block (every key tile), where asked for.
    const uint32_t capacity = steps_path.empty() ? 0 : uint32_t((n + kernel.Bc - 1) / kernel.Bc);
    const std::size_t step_count = std::size_t(blocks) * capacity;
    uint64_t* steps =
        capacity > 0 ? device_array<uint64_t>(int64_t(step_count), "the step log") : nullptr;
    std::vector<uint64_t> host_steps(step_count);
    uint64_t* no_steps = nullptr;
    check_cuda(cudaMemcpyToSymbol(block_log::g_steps, &no_steps, sizeof no_steps), "steps off");
    launch(p);  // the warm-up, not logged
    check_cuda(cudaDeviceSynchronize(), "warm-up");
    check_cuda(cudaMemcpyToSymbol(block_log::g_entries, &entries, sizeof entries), "log on");
    check_cuda(cudaMemcpyToSymbol(block_log::g_steps, &steps, sizeof steps), "steps on");
    check_cuda(cudaMemcpyToSymbol(block_log::g_step_capacity, &capacity, sizeof capacity),
               "step capacity");
    if (capacity > 0) steps_out << "N,heads,causal,call,block,step,start_ns\n";

    out << "N,d,dtype,heads,call,block,head,tile,sm,start_ns,end_ns,causal\n";
    for (int call = 0; call < calls; ++call) {
      check_cuda(cudaMemset(entries, 0, std::size_t(blocks) * sizeof(block_log::Entry)), "clear");
      if (steps) check_cuda(cudaMemset(steps, 0, step_count * sizeof(uint64_t)), "clear steps");
      check_cuda(cudaDeviceSynchronize(), "clear");
      check_cuda(cudaProfilerStart(), "cudaProfilerStart");
      launch(p);
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
      // A block's steps in order, each one it began (the ones past its keys stay 0).
      for (std::size_t k = 0; k < step_count; ++k)
        if (host_steps[k] != 0)
          steps_out << fmt::format("{},{},{},{},{},{},{}\n", n, heads, int(causal), call,
                                   k / capacity, k % capacity, host_steps[k] - t0);
      for (int64_t b = 0; b < blocks; ++b) {
        const auto& e = host[std::size_t(b)];
        if (e.end == 0) throw std::runtime_error(fmt::format("block {} left no entry", b));
        out << fmt::format("{},{},bf16,{},{},{},{},{},{},{},{},{}\n", n, d, heads, call, b, b / tr,
                           tile_of(b % tr), e.sm, e.start - t0, e.end - t0, int(causal));
      }
      std::printf("call %d: %lld blocks, %.1f us\n", call, static_cast<long long>(blocks),
                  double(last_end - t0) / 1000.0);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kernel.program, e.what());
    return 1;
  }
  return 0;
}

}  // namespace flashlab::bench

// bench_block_log: fa2's grid as a GPU runs it, block by block: the SM each block ran on and
// its start and end (%globaltimer), for the grid model's replay (sim::GridSchedule::logged).
//
// Past the L2's crossover the grid model, whose blocks step together, books fewer DRAM reads
// than the H200 makes (1.3 to 1.5 times at 16 heads, N = 57,344 to 131,072; docs/IO-LEVELS.md,
// "Past the crossover"): the blocks of a head drift apart over the waves, and those that
// trail the leaders by more than what a partition holds read K and V from DRAM again. Where
// and when the blocks really ran is what the model lacks. This program builds fa2's kernel
// (gpu/kernels/03_fa2.cu, the library's own source) with its block log on (block_log.cuh)
// and runs it on random bf16 inputs: a warm-up call, then each logged call between
// cudaProfilerStart and Stop, so that Nsight Compute (`--profile-from-start off`) reads the
// DRAM bytes of exactly the calls logged (bench/gpu/block_log.py runs both and joins them).
//
//   bench_block_log --heads 16 --n 65536 [--d 128] [--calls 2] --csv log.csv
//
// The CSV has a row per block and call: N, d, dtype, heads, call, block (the grid model's
// block id: head x Tr + blockIdx.x), head, tile (the query tile it ran), sm, start_ns and
// end_ns (from the call's first start).
#define FLASHLAB_BLOCK_LOG
#include "../../gpu/kernels/03_fa2.cu"

#include "bench_device.cuh"

#include <CLI/CLI.hpp>
#include <cuda_profiler_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

using flashlab::bench::check_cuda;
using flashlab::bench::device_array;
using flashlab::bench::fill;
namespace block_log = flashlab::gpu::block_log;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fa2's grid block by block: each block's SM, start and end (the grid model's replay)"};
  int heads = 16, n = 65536, d = 128, calls = 1;
  std::string csv_path;
  app.add_option("--heads", heads, "query heads (as many KV heads), B = 1")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--n", n, "queries and keys per head")
      ->capture_default_str()->check(CLI::Range(1, 1 << 22));
  app.add_option("--d", d, "the head dimension")->capture_default_str()->check(CLI::IsMember({64, 128}));
  app.add_option("--calls", calls, "logged calls after the warm-up")
      ->capture_default_str()->check(CLI::Range(1, 16));
  app.add_option("--csv", csv_path, "write the blocks here")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    std::ofstream out(csv_path);
    if (!out) throw std::runtime_error("cannot write " + csv_path + ": give a writable --csv path");
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

    flashlab::gpu::Problem p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
    const flashlab::gpu::Strides s{int64_t(heads) * n * d, int64_t(n) * d, d};
    p.q_stride = p.k_stride = p.v_stride = p.o_stride = s;
    p.batch = 1, p.heads_q = p.heads_kv = heads, p.n_q = p.n_k = n, p.d = d;
    p.scale = 1.0f / std::sqrt(float(d));
    p.dtype = FLASHLAB_BF16;

    const int64_t tr = (n + flashlab::gpu::kBr - 1) / flashlab::gpu::kBr;
    const int64_t blocks = tr * heads;
    auto* entries = device_array<block_log::Entry>(blocks, "the block log");
    std::vector<block_log::Entry> host(static_cast<std::size_t>(blocks));
    block_log::Entry* none = nullptr;
    check_cuda(cudaMemcpyToSymbol(block_log::g_entries, &none, sizeof none), "log off");
    flashlab::gpu::launch_fa2(p, nullptr);  // the warm-up, not logged
    check_cuda(cudaDeviceSynchronize(), "warm-up");
    check_cuda(cudaMemcpyToSymbol(block_log::g_entries, &entries, sizeof entries), "log on");

    out << "N,d,dtype,heads,call,block,head,tile,sm,start_ns,end_ns\n";
    for (int call = 0; call < calls; ++call) {
      check_cuda(cudaMemset(entries, 0, std::size_t(blocks) * sizeof(block_log::Entry)), "clear");
      check_cuda(cudaDeviceSynchronize(), "clear");
      check_cuda(cudaProfilerStart(), "cudaProfilerStart");
      flashlab::gpu::launch_fa2(p, nullptr);
      check_cuda(cudaDeviceSynchronize(), "the logged call");
      check_cuda(cudaProfilerStop(), "cudaProfilerStop");
      check_cuda(cudaMemcpy(host.data(), entries, host.size() * sizeof(block_log::Entry),
                            cudaMemcpyDeviceToHost),
                 "the log");
      uint64_t t0 = UINT64_MAX, last_end = 0;  // the call's first start and last end
      for (const auto& e : host) t0 = std::min(t0, e.start), last_end = std::max(last_end, e.end);
      for (int64_t b = 0; b < blocks; ++b) {
        const auto& e = host[std::size_t(b)];
        if (e.end == 0) throw std::runtime_error(fmt::format("block {} left no entry", b));
        out << fmt::format("{},{},bf16,{},{},{},{},{},{},{},{}\n", n, d, heads, call, b, b / tr,
                           b % tr, e.sm, e.start - t0, e.end - t0);
      }
      std::printf("call %d: %lld blocks, %.1f us\n", call, static_cast<long long>(blocks),
                  double(last_end - t0) / 1000.0);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_block_log: %s\n", e.what());
    return 1;
  }
  return 0;
}

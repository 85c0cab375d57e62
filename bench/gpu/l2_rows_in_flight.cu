// bench_l2_rows_in_flight: the naive softmax's traffic without its arithmetic, to measure how
// much of the L2 its rows in flight keep between their passes.
//
// The naive kernel's softmax (gpu/kernels/01_naive.cu, softmax_rows) runs one block a row of
// S: it reads the row naive::kSoftmaxPasses times (ld.global.cg), then writes the row's P. Its
// second and third passes find the row in the L2 only while the rows of all its resident
// blocks fit there. The naive mirror (lessons/gpu_bridge/kernels.cpp) books that with the
// rows in flight the occupancy allows (8 blocks of 256 threads an SM on the H200, 1,056
// rows), each partition holding the rows its own SMs read; on the H200 the re-reads begin
// near N = 6,000 and are complete by 14,336, where that mirror puts them between 9,936 and
// 14,895 (docs/IO-LEVELS.md, "The naive kernel's transition measured").
//
// This program runs the same traffic with the knobs the real kernel does not have, one launch
// per size, each read by Nsight Compute's DRAM counters (bench/gpu/l2_rows_in_flight.py):
//   --blocks-per-sm k  the rows in flight, k x SMs: the occupancy set by dynamic shared memory
//                      (8 is the real kernel's, where threads are the limit). If the re-reads
//                      depend on the bytes in flight alone, k rows of N and k / 2 rows of 2N
//                      re-read alike.
//   --no-p             the last pass reads and does not write P: whether the dirty lines of P
//                      take more of the L2 than their bytes.
//   --lockstep         one persistent block per slot, all of them taking each pass together
//                      (a grid barrier between passes, a cooperative launch): whether the
//                      blocks' drift out of step moves the re-reads.
//   --skip-sms LIST    the rows of the other SMs alone (bench_l2_partitions says which SMs
//                      read through which partition: one side's rows with the other side
//                      idle), whether the other side's traffic takes room from this side's.
//                      k x SMs persistent blocks, those on these SMs ending at once, the
//                      others taking the next row from a counter as they finish one (what
//                      the block scheduler does with the real grid).
//   --persistent       those persistent blocks on every SM: the control of --skip-sms.
// Each thread sums what it reads and the last pass writes P from it (the reads cannot be
// dropped); S is zeros, P is bf16 as the real kernel's with bf16 inputs.
//
//   bench_l2_rows_in_flight --n 6144 8192 [--blocks-per-sm 8] [--rows R] [--no-p]
//                           [--lockstep | --persistent] [--skip-sms S S ...]
//                           [--csv launches.csv]
// The CSV has one row per launch, in launch order (what l2_rows_in_flight.py joins with
// Nsight Compute's rows).
#include "bench_device.cuh"
#include "flashlab/gpu/kernel_info.hpp"

#include <CLI/CLI.hpp>
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace cg = cooperative_groups;
using flashlab::bench::check_cuda;
using flashlab::bench::Device;
using flashlab::bench::device_facts;
using flashlab::bench::shared_bytes_for;
using flashlab::bench::sm_id;

using flashlab::gpu::naive::kSoftmaxPasses;
using flashlab::gpu::naive::kSoftmaxThreads;

constexpr int kMostSms = 256;  // --skip-sms takes SM ids below this
constexpr int kMaskWords = kMostSms / 32;
// The most blocks of the softmax's size an SM holds: Hopper's 2048 threads an SM.
constexpr int kMostBlocksPerSm = 2048 / kSoftmaxThreads;
// A value the sum of zeros never takes: the test that keeps the reads cannot pass.
constexpr float kNeverSummed = 1234.5f;

// Whether SM `sm` is among those of the mask (a bit an SM) whose blocks end at once.
__host__ __device__ bool skipped(const unsigned* mask, unsigned sm) {
  return mask[sm / 32] >> (sm % 32) & 1u;
}

// One pass of one block over its row of `n` scores; the last pass writes the row of P.
template <bool kWriteP>
__device__ float row_pass(const float* gS_row, __nv_bfloat16* gP_row, int n, bool last,
                          float sum) {
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float s = __ldcg(gS_row + j);
    sum += s;
    if (kWriteP && last) gP_row[j] = __float2bfloat16(s + sum);
  }
  __syncthreads();  // the pass ends for the whole block, as the real kernel's reduction does
  return sum;
}

// Every pass of one block over row r.
template <bool kWriteP>
__device__ float row_passes(const float* gS, __nv_bfloat16* gP, int n, int r, float sum) {
  const std::size_t at = std::size_t(r) * n;
  for (int pass = 1; pass <= kSoftmaxPasses; ++pass)
    sum = row_pass<kWriteP>(gS + at, gP + at, n, pass == kSoftmaxPasses, sum);
  return sum;
}

// Keeps the reads of a pass whose sum nothing else uses.
__device__ void keep(float sum, float* sink) {
  if (sum == kNeverSummed) *sink = sum;
}

// The dynamic shared memory each kernel is launched with only sets how many blocks share an
// SM (shared_bytes_for); the claimed kernel also keeps its row there.

// As the real softmax's grid: block r takes row r and its passes, free to drift.
template <bool kWriteP>
__global__ void rows_traffic(const float* gS, __nv_bfloat16* gP, int n, float* sink) {
  keep(row_passes<kWriteP>(gS, gP, n, int(blockIdx.x), 0.0f), sink);
}

// One side alone: persistent blocks; one on an SM of `skip` (a bit an SM) ends at once, the
// others take rows from `next_row` until `rows` are taken.
template <bool kWriteP>
__global__ void rows_traffic_claimed(const float* gS, __nv_bfloat16* gP, int n, int rows,
                                     const unsigned* skip, unsigned* next_row, float* sink) {
  extern __shared__ unsigned char occupy[];
  if (skipped(skip, sm_id())) return;
  int* claimed = reinterpret_cast<int*>(occupy);
  float sum = 0;
  for (;;) {
    if (threadIdx.x == 0) *claimed = int(atomicAdd(next_row, 1u));
    __syncthreads();
    const int r = *claimed;
    __syncthreads();  // every thread has read the row before thread 0 claims the next
    if (r >= rows) break;
    sum = row_passes<kWriteP>(gS, gP, n, r, sum);
  }
  keep(sum, sink);
}

// Lockstep: gridDim.x persistent blocks (every one resident) take rows in groups of
// gridDim.x, and every block ends each pass before any begins the next.
template <bool kWriteP>
__global__ void rows_traffic_lockstep(const float* gS, __nv_bfloat16* gP, int n, int rows,
                                      float* sink) {
  cg::grid_group grid = cg::this_grid();
  float sum = 0;
  for (int r0 = 0; r0 < rows; r0 += gridDim.x) {
    const int r = r0 + blockIdx.x;
    const std::size_t at = std::size_t(r) * n;
    for (int pass = 1; pass <= kSoftmaxPasses; ++pass) {
      if (r < rows) sum = row_pass<kWriteP>(gS + at, gP + at, n, pass == kSoftmaxPasses, sum);
      grid.sync();
    }
  }
  keep(sum, sink);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The naive softmax's traffic (rows of S read three times, P written) with its "
               "rows in flight, P and the blocks' order as knobs"};
  std::vector<int> sizes;
  int per_sm = 8, rows_asked = 0;
  bool no_p = false, lockstep = false;
  std::string csv_path;
  app.add_option("--n", sizes, "scores a row (one launch each)")
      ->required()
      ->check(CLI::Range(32, 1 << 20));
  app.add_option("--blocks-per-sm", per_sm, "resident blocks an SM (rows in flight / SMs)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMostBlocksPerSm));
  app.add_option("--rows", rows_asked, "rows a launch (0: N, one head's S)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-p", no_p, "the last pass writes no P");
  app.add_flag("--lockstep", lockstep, "persistent blocks, a grid barrier between passes");
  std::vector<int> skip_sms;
  app.add_option("--skip-sms", skip_sms, "SMs whose blocks end at once (not with --lockstep)")
      ->check(CLI::Range(0, kMostSms - 1))
      ->excludes("--lockstep");
  bool persistent = false;
  app.add_flag("--persistent", persistent,
               "persistent blocks taking rows from a counter (what --skip-sms runs)")
      ->excludes("--lockstep");
  app.add_option("--csv", csv_path, "write one row per launch here");
  CLI11_PARSE(app, argc, argv);

  try {
    const Device dev = device_facts();
    const auto free_kernel = no_p ? rows_traffic<false> : rows_traffic<true>;
    const auto lockstep_kernel = no_p ? rows_traffic_lockstep<false> : rows_traffic_lockstep<true>;
    const auto claimed_kernel = no_p ? rows_traffic_claimed<false> : rows_traffic_claimed<true>;
    const bool claimed = persistent || !skip_sms.empty();
    const int bytes = lockstep   ? shared_bytes_for(lockstep_kernel, dev, per_sm, kSoftmaxThreads)
                      : claimed ? shared_bytes_for(claimed_kernel, dev, per_sm, kSoftmaxThreads)
                                 : shared_bytes_for(free_kernel, dev, per_sm, kSoftmaxThreads);

    const int most = *std::max_element(sizes.begin(), sizes.end());
    const std::size_t most_rows = rows_asked > 0 ? std::size_t(rows_asked) : std::size_t(most);
    float* d_s = nullptr;
    __nv_bfloat16* d_p = nullptr;
    float* d_sink = nullptr;
    unsigned* d_skip = nullptr;  // kMaskWords, then the next row's counter
    unsigned skip[kMaskWords + 1] = {};
    for (const int sm : skip_sms) skip[sm / 32] |= 1u << (sm % 32);
    check_cuda(cudaMalloc(&d_skip, sizeof skip), "cudaMalloc");
    check_cuda(cudaMalloc(&d_s, sizeof(float) * most_rows * most), "cudaMalloc S");
    check_cuda(cudaMalloc(&d_p, sizeof(__nv_bfloat16) * most_rows * most), "cudaMalloc P");
    check_cuda(cudaMalloc(&d_sink, sizeof(float)), "cudaMalloc");
    check_cuda(cudaMemset(d_s, 0, sizeof(float) * most_rows * most), "cudaMemset");

    std::ofstream csv;
    if (!csv_path.empty()) {
      csv.open(csv_path);
      if (!csv) throw std::runtime_error("cannot write " + csv_path);
      csv << "launch,blocks_per_sm,rows_in_flight,n,rows,write_p,lockstep,persistent,skipped_sms,"
             "passes,s_bytes\n";
    }
    int idle_sms = 0;
    for (int sm = 0; sm < dev.sms; ++sm) idle_sms += skipped(skip, unsigned(sm));
    const int in_flight = (dev.sms - idle_sms) * per_sm;
    fmt::print("{} SMs x {} blocks = {} rows in flight ({} bytes of shared memory a block), "
               "P {}, {}\n",
               dev.sms - idle_sms, per_sm, in_flight, bytes, no_p ? "not written" : "written",
               lockstep ? "passes in lockstep"
               : claimed ? "persistent blocks taking rows in turn"
                         : "blocks free to drift");
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      int n = sizes[i];
      int rows = rows_asked > 0 ? rows_asked : n;
      if (lockstep) {
        void* args[] = {&d_s, &d_p, &n, &rows, &d_sink};
        check_cuda(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(lockstep_kernel),
                                               dim3(in_flight), dim3(kSoftmaxThreads), args,
                                               bytes),
                   "cudaLaunchCooperativeKernel");
      } else if (claimed) {
        check_cuda(cudaMemcpy(d_skip, skip, sizeof skip, cudaMemcpyHostToDevice), "cudaMemcpy");
        claimed_kernel<<<dev.sms * per_sm, kSoftmaxThreads, bytes>>>(
            d_s, d_p, n, rows, d_skip, d_skip + kMaskWords, d_sink);
      } else {
        free_kernel<<<rows, kSoftmaxThreads, bytes>>>(d_s, d_p, n, d_sink);
      }
      check_cuda(cudaDeviceSynchronize(), "rows_traffic");
      const double s_bytes = double(sizeof(float)) * double(rows) * n;
      fmt::print("  N = {}: {} rows, S {:.1f} MiB, rows in flight {:.1f} MiB\n", n, rows,
                 s_bytes / 1048576.0, double(sizeof(float)) * n * in_flight / 1048576.0);
      if (csv)
        csv << fmt::format("{},{},{},{},{},{},{},{},{},{},{:.0f}\n", i, per_sm, in_flight, n,
                           rows, no_p ? 0 : 1, lockstep ? 1 : 0, claimed ? 1 : 0, idle_sms,
                           kSoftmaxPasses, s_bytes);
    }
    cudaFree(d_s);
    cudaFree(d_p);
    cudaFree(d_sink);
    cudaFree(d_skip);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_l2_rows_in_flight: {}\n", e.what());
    return 2;
  }
  return 0;
}

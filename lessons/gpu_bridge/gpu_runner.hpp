// Running flashlab's GPU kernels (gpu/, through its C ABI) on host matrices, for
// `flashlab compare` and the lessons' GPU steps: a forward kernel, fa3 counting its
// conditional rescales, the backward pass and split-KV decode. The first call loads the GPU runner
// plugin (runner_abi.h); where it cannot be loaded (no CUDA at build time, the plugin not built, no
// device), every call says plainly why nothing ran.
#pragma once

#include "flashlab/cpu/conditional_rescaling.hpp"
#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/types.hpp"
#include "flashlab/fa3.h"
#include "flashlab/sim/dtype.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app {

struct GpuStatus {
  bool available = false;
  std::string description;  // the device's name, or why there is none
};

// Loads the plugin on first use; later calls answer from what the first one found.
GpuStatus gpu_status();

// The line `flashlab compare` prints about the device: "GPU: <name>", and, where the device is
// not the GPU the kernels' mirrors predict for (target_profile(), its device_name, "H200", in
// the device's), a second line saying which figures still compare there and which do not.
std::string gpu_line(const GpuStatus& status);

// The line `flashlab compare` prints about the predictions: the target's name, description,
// SMs and L2 ("Predicted for h200: NVIDIA H200 SXM 141GB (...), 132 SMs, 60.0 MiB of L2 in
// 2 partitions").
std::string target_line();

struct GpuRun {
  std::string kernel;  // a name from the kernel table ("naive", "scalar", "fa2", ...)
  bool ran = false;
  std::string message;   // why it did not run (unsupported shape, no device, ...)
  cpu::Matrix<float> O;  // (N_q, d), read back and widened to fp32
  double median_ms = 0;  // CUDA events around the call, median of the repeats
};

// One forward call of `kernel` on Q (N_q, d), K, V (N_k, d), rounded to dtype on the way in,
// in batch 1 with `heads` heads (each a copy of the same matrices in memory of its own; O is
// head 0's). `warmups` untimed calls come first (module loading, cuBLAS set-up), then
// `repeats` >= 1 timed ones. fa3_kv_l2_share: fa3's tile order's share of the L2 in percent
// (flashlab_fa3_options.kv_l2_share), or FLASHLAB_FA3_AUTO for its default; the other
// kernels have no such order and run as always.
GpuRun run_gpu_forward(const std::string& kernel, const cpu::Matrix<float>& Q,
                       const cpu::Matrix<float>& K, const cpu::Matrix<float>& V, sim::DType dtype,
                       cpu::Causal causal, int warmups, int repeats, cpu::Index heads = 1,
                       std::int32_t fa3_kv_l2_share = FLASHLAB_FA3_AUTO);

// The kernel a command measured under Nsight Compute runs first, so that the DRAM writes ncu
// charges the first kernel that reads more than the L2 holds fall on it (ncu_bytes.hpp,
// kNcuFirstKernels): one fa2 forward of one query a head against K and V of twice the
// target's L2, which pushes out whatever the L2 held dirty. Throws std::runtime_error, "<who>:
// the first kernel did not run: <why>", where it did not run.
void run_ncu_first_kernel(std::string_view who);

struct GpuRescaleRun {
  bool ran = false;
  std::string message;        // why it did not run
  cpu::RescaleCounts counts;  // what every (row, KV tile) update did, counted on the device
  cpu::Matrix<float> O;       // (N_q, d), read back and widened to fp32
};

// fa3 once on Q (N_q, d), K, V (N_k, d), rounded to dtype (fp16 or bf16) on the way in, with
// FlashAttention-4's conditional rescaling on (flashlab/fa3.h, the other switches at their
// defaults) and its counts read back; batch 1, one head, the scale 1 / sqrt(d).
GpuRescaleRun run_gpu_rescale_counts(const cpu::Matrix<float>& Q, const cpu::Matrix<float>& K,
                                     const cpu::Matrix<float>& V, sim::DType dtype,
                                     cpu::Causal causal);

struct GpuBackwardOptions {
  sim::DType dtype = sim::DType::bf16;  // fp16 or bf16
  cpu::Causal causal = cpu::Causal::none;
  bool deterministic = false;  // dQ summed in a fixed order (flashlab_backward_params)
  int warmups = 2, repeats = 10;
};

struct GpuBackwardRun {
  bool ran = false;
  std::string message;                // why it did not run
  cpu::HeadTensor<float> dQ, dK, dV;  // the last run's, widened to fp32; shapes as Q, K, V
  double median_ms = 0;               // the backward alone, median of the repeats
  std::int64_t workspace_bytes = 0;   // flashlab_backward_workspace_bytes
  bool bitwise_repeats = false;       // every timed run's dQ, dK, dV equal the first's
};

// fa2's forward once (O and L on the device), then flashlab_backward `warmups + repeats`
// times. Q, dO (1, heads_q, N_q, d), K, V (1, heads_kv, N_k, d), fp32 rounded to dtype on the
// way in; query head h reads KV head h / (heads_q / heads_kv).
GpuBackwardRun run_gpu_backward(const cpu::HeadTensor<float>& Q, const cpu::HeadTensor<float>& K,
                                const cpu::HeadTensor<float>& V, const cpu::HeadTensor<float>& dO,
                                const GpuBackwardOptions& options);

struct GpuDecodeOptions {
  sim::DType dtype = sim::DType::bf16;  // fp16 or bf16
  cpu::Index page_size = 0;             // 0: a contiguous cache; else keys per page
  std::uint64_t table_seed = 0;         // shuffles the block table (block_table.hpp)
  std::vector<int> splits = {0};        // one run per entry; 0 = the automatic count
  int warmups = 2, repeats = 10;
  bool queue = false;                   // the queue grid (FLASHLAB_DECODE_GRID_QUEUE)
};

struct GpuDecodeRun {
  bool ran = false;
  std::string message;                    // why it did not run
  std::vector<cpu::HeadTensor<float>> O;  // per entry of splits: (batch, heads_q, N_q, d)
  std::vector<cpu::HeadTensor<float>> L;  // per entry: (batch, heads_q, N_q, 1)
  std::vector<int> splits_used;           // per entry: the count the library chose or took
  std::vector<double> median_ms;          // per entry
  std::int64_t workspace_bytes = 0;       // the largest entry's
};

// flashlab_decode on Q (batch, heads_q, N_q, d) against the cache K, V (batch, heads_kv,
// max_seq_len, d), sequence b holding its first seq_lens[b] keys; bottom-right causal when
// N_q > 1, as decode.h says.
GpuDecodeRun run_gpu_decode(const cpu::HeadTensor<float>& Q, const cpu::HeadTensor<float>& K,
                            const cpu::HeadTensor<float>& V,
                            const std::vector<cpu::Index>& seq_lens,
                            const GpuDecodeOptions& options);

}  // namespace flashlab::app

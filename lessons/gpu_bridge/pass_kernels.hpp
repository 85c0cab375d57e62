// The GPU backward and decode as the lessons see them: the facts of their kernels (read from
// gpu/include/flashlab/gpu/kernel_info.hpp, their one owner), the runs the command line asks
// for, and what their simulator mirrors predict on the target GPU.
#pragma once

#include "gpu_bridge/kernels.hpp"

#include "flashlab/sim/backward_kernel.hpp"
#include "flashlab/sim/decode_kernel.hpp"

#include <optional>
#include <string>
#include <vector>

namespace flashlab::app {

// One backward: batch x heads query heads over kv_heads KV heads (GQA), N_q queries against
// N keys; causal is top-left when N_q = N and bottom-right otherwise, as KernelRun's.
struct BackwardRun {
  Index batch = 1, heads = 1, kv_heads = 0, n = 1024, n_q = 0, d = 64;  // 0: heads; 0: N
  std::string dtype = "bf16";
  bool causal = false, deterministic = false;

  Index queries() const { return n_q > 0 ? n_q : n; }
  Index key_value_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  cpu::Causal alignment() const;
};

// One decode step: a cache length per sequence, n_q new query rows in kv_heads x group query
// heads; splits = 0 lets the kernel's rule choose (decode_splits); page_size 0: contiguous;
// queue: the queue grid (decode.h's FLASHLAB_DECODE_GRID_QUEUE), splits its pieces.
struct DecodeRun {
  std::vector<Index> lengths{4096};
  Index kv_heads = 1, group = 1, n_q = 1, d = 128, splits = 0, page_size = 0;
  std::string dtype = "bf16";
  bool queue = false;
};

// The facts the mirror is configured with, or why the kernel does not take this d or dtype.
struct BackwardFacts {
  std::optional<sim::BackwardKernelFacts> facts;
  std::string why_not;
};
struct DecodeFacts {
  std::optional<sim::DecodeKernelFacts> facts;
  std::string why_not;
};
BackwardFacts backward_kernel_facts(Index d, sim::DType dtype, bool deterministic);
// queue: the queue grid's facts, its persistent blocks for `sm_count` SMs.
DecodeFacts decode_kernel_facts(Index d, sim::DType dtype, Index splits, Index page_size,
                                bool queue = false, Index sm_count = 0);

// The split count (or the queue's pieces) the decode kernel chooses for this run on this GPU.
Index decode_splits(const DecodeRun& run, const sim::HardwareProfile& profile);

// A pass's mirror on the target GPU (target_profile()), or why there is none.
struct PassPrediction {
  std::string label;  // "backward (Br 64, Bc 128, ...)"
  std::optional<sim::PassReport> report;
  std::string why_not;
};
PassPrediction predict(const BackwardRun& run);
PassPrediction predict(const DecodeRun& run);

}  // namespace flashlab::app

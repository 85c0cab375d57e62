// The backward's and decode's kernel facts, and their mirrors' predictions.
//
// The backward's facts below are the design of that kernel as it is being written
// (gpu/kernels/); they are to be reconciled with the `fa2_backward` section of
// gpu/include/flashlab/gpu/kernel_info.hpp and then read from there. The decode's facts
// (keys a step, threads, the split rule) are read from its `decode` section, as
// kernel_mirror() reads the forward kernels' facts.
#include "gpu_bridge/pass_kernels.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashlab::app {

namespace {

// The head dimensions and dtypes both kernels take.
constexpr Index kHeadDims[] = {64, 128};

std::string refusal(std::string_view kernel, Index d, sim::DType dtype) {
  if (dtype == sim::DType::fp32)
    return fmt::format("the {} kernel takes bf16 and fp16 inputs, not fp32", kernel);
  if (std::find(std::begin(kHeadDims), std::end(kHeadDims), d) == std::end(kHeadDims))
    return fmt::format("d = {} is not supported by the {} kernel: it supports d in {{64, 128}}", d,
                       kernel);
  return "";
}

// The backward's main kernel: a block of 8 warps owns Bc keys; Br query rows a step.
constexpr Index kBackwardBr = 64;
constexpr Index kBackwardBc = 128;
constexpr int kBackwardThreads = 8 * 32;

}  // namespace

cpu::Causal BackwardRun::alignment() const {
  if (!causal) return cpu::Causal::none;
  return queries() == n ? cpu::Causal::top_left : cpu::Causal::bottom_right;
}

BackwardFacts backward_kernel_facts(Index d, sim::DType dtype, bool deterministic) {
  if (std::string why = refusal("backward", d, dtype); !why.empty()) return {std::nullopt, why};
  const Index b = sim::bytes_of(dtype), f = sim::bytes_of(sim::kAccumulator);
  // K_j, V_j (Bc, d) and Q_i, dO_i (Br, d) in the input dtype; L_i, D_i (Br) in fp32.
  const sim::Bytes sram = b * (2 * kBackwardBc * d + 2 * kBackwardBr * d) + f * 2 * kBackwardBr;
  return {sim::BackwardKernelFacts{.Br = kBackwardBr,
                                   .Bc = kBackwardBc,
                                   .threads = kBackwardThreads,
                                   .sram_bytes = sram,
                                   .dtype = dtype,
                                   .deterministic = deterministic},
          ""};
}

DecodeFacts decode_kernel_facts(Index d, sim::DType dtype, Index splits, Index page_size) {
  if (std::string why = refusal("decode", d, dtype); !why.empty()) return {std::nullopt, why};
  return {sim::DecodeKernelFacts{.splits = splits,
                                 .keys_per_step = gpu::decode::bc(d),
                                 .page_size = page_size,
                                 .threads = gpu::decode::kThreads,
                                 .dtype = dtype},
          ""};
}

Index decode_splits(const DecodeRun& run, const sim::HardwareProfile& profile) {
  if (run.lengths.empty()) return 1;  // refused by the mirror, which says why
  const Index longest = *std::max_element(run.lengths.begin(), run.lengths.end());
  return gpu::decode::auto_splits(Index(run.lengths.size()), run.kv_heads, run.group, run.n_q,
                                  longest, profile.sm_count);
}

PassPrediction predict(const BackwardRun& run) {
  const sim::DType dtype = sim::parse_dtype(run.dtype);
  const BackwardFacts f = backward_kernel_facts(run.d, dtype, run.deterministic);
  if (!f.facts) return {"backward", std::nullopt, f.why_not};
  const sim::BackwardShape shape{.batch = run.batch,
                                 .heads_q = run.heads,
                                 .heads_kv = run.key_value_heads(),
                                 .n_q = run.queries(),
                                 .n_k = run.n,
                                 .d = run.d,
                                 .causal = run.alignment()};
  sim::PassReport report = sim::count_backward_kernel(shape, *f.facts);
  return {fmt::format("{} ({})", report.pass, report.label), std::move(report), ""};
}

PassPrediction predict(const DecodeRun& run) {
  const sim::DType dtype = sim::parse_dtype(run.dtype);
  const Index splits = run.splits > 0 ? run.splits : decode_splits(run, target_profile());
  const DecodeFacts f = decode_kernel_facts(run.d, dtype, splits, run.page_size);
  if (!f.facts) return {"decode", std::nullopt, f.why_not};
  const sim::DecodeShape shape{.lengths = run.lengths,
                               .heads_kv = run.kv_heads,
                               .group = run.group,
                               .n_q = run.n_q,
                               .d = run.d};
  sim::PassReport report = sim::count_decode_kernel(shape, *f.facts);
  return {fmt::format("{} ({})", report.pass, report.label), std::move(report), ""};
}

}  // namespace flashlab::app

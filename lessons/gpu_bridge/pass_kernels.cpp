// The backward's and decode's kernel facts, read from the GPU library's own description of
// the kernels (gpu/include/flashlab/gpu/kernel_info.hpp: `fa2_backward` and `decode`), and
// their mirrors' predictions. Nothing here states a tile size: kernel_info.hpp owns them.
#include "gpu_bridge/pass_kernels.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashlab::app {

namespace {

// Why a pass's kernel does not take (d, dtype), in the words validation uses; "" when it does.
std::string refusal(std::string_view kernel, const gpu::HeadDims& dims, gpu::DtypeSet dtypes,
                    Index d, sim::DType dtype) {
  if (!dtypes.contains(c_dtype(dtype)))
    return fmt::format("the {} kernel takes {} inputs, not {}", kernel,
                       gpu::text::describe(dtypes), sim::to_string(dtype));
  if (!dims.contains(d))
    return fmt::format("d = {} is not supported by the {} kernel: it supports {}", d, kernel,
                       gpu::text::describe(dims));
  return "";
}

gpu::HeadDims decode_head_dims() {
  gpu::HeadDims dims;
  for (const int64_t d : gpu::decode::kHeadDims) dims.values[dims.count++] = d;
  return dims;
}

}  // namespace

cpu::Causal BackwardRun::alignment() const {
  if (!causal) return cpu::Causal::none;
  return queries() == n ? cpu::Causal::top_left : cpu::Causal::bottom_right;
}

BackwardFacts backward_kernel_facts(Index d, sim::DType dtype, bool deterministic) {
  namespace k = gpu::fa2_backward;
  if (std::string why = refusal("backward", k::kHeadDims, k::kDtypes, d, dtype); !why.empty())
    return {std::nullopt, why};
  // The pre- and post-kernels' blocks an SM holds, by threads: they use no shared memory and
  // few registers (a warp a row), so the SM's resident threads are what binds.
  const int pre_post_blocks_per_sm = target_profile().sm.max_threads / k::kPreprocessThreads;
  // The stores of the kernels that run around either main kernel (pre, post, dQ kernel).
  sim::BackwardStores stores{.dk_dv = sim_store(k::dk_dv_store(d, c_dtype(dtype))),
                             .dq_reduction = sim_store(k::kDqReduction),
                             .d = sim_store(k::kDStore),
                             .accumulator_zeros = sim_store(k::kAccumulatorZeroStore),
                             .dq = sim_store(k::dq_store(c_dtype(dtype))),
                             .dq_kernel = sim_store(k::dq_kernel_store(d, c_dtype(dtype)))};
  // The main kernel the library runs for such a call (the bridge's runs have no dropout and
  // contiguous rows): the one rule, fa3_backward::takes.
  if (gpu::fa3_backward::takes(deterministic, /*dropout=*/false, /*row_stride_zero=*/false)) {
    namespace v3k = gpu::fa3_backward;
    const gpu::KernelConfig v3 = v3k::config(d, c_dtype(dtype));
    stores.dk_dv = sim_store(v3k::kDkDvStore);
    stores.dq_reduction = sim_store(v3k::kDqReduction);
    stores.dq_reduction_passes = v3k::dq_reduction_passes(d);
    return {sim::BackwardKernelFacts{.Br = v3.Br,
                                     .Bc = v3.Bc,
                                     .threads = v3.threads,
                                     .sram_bytes = v3.sram_bytes,
                                     .dtype = dtype,
                                     .deterministic = deterministic,
                                     .blocks_per_sm = v3.blocks_per_sm,
                                     .pre_post_rows_per_block = k::kPreprocessRowsPerBlock,
                                     .pre_post_threads = k::kPreprocessThreads,
                                     .pre_post_blocks_per_sm = pre_post_blocks_per_sm,
                                     .stores = stores,
                                     .skips_unseen_kv = true,
                                     .tma_boxes = true,
                                     .main_kernel = "v3"},
            ""};
  }
  const gpu::KernelConfig dq = k::dq_config(d, c_dtype(dtype));  // the dQ kernel's own
  return {sim::BackwardKernelFacts{.Br = k::kBr,
                                   .Bc = k::kBc,
                                   .threads = k::kThreads,
                                   .sram_bytes = k::sram_bytes(d, c_dtype(dtype)),
                                   .dtype = dtype,
                                   .deterministic = deterministic,
                                   .dq_Br = dq.Br,
                                   .dq_Bc = dq.Bc,
                                   .dq_threads = dq.threads,
                                   .blocks_per_sm = k::config(d, c_dtype(dtype)).blocks_per_sm,
                                   .dq_blocks_per_sm = dq.blocks_per_sm,
                                   .pre_post_rows_per_block = k::kPreprocessRowsPerBlock,
                                   .pre_post_threads = k::kPreprocessThreads,
                                   .pre_post_blocks_per_sm = pre_post_blocks_per_sm,
                                   .stores = stores},
          ""};
}

namespace {
// kernel_info's piece rule in the mirror's types.
Index piece_first_step(Index steps, Index pieces, Index piece) {
  return gpu::decode::piece_first_tile(steps, pieces, piece);
}
}  // namespace

DecodeFacts decode_kernel_facts(Index d, sim::DType dtype, Index splits, Index page_size,
                                bool queue, Index sm_count) {
  namespace k = gpu::decode;
  if (std::string why =
          refusal("decode", decode_head_dims(), gpu::DtypeSet{k::kDtypeBits}, d, dtype);
      !why.empty())
    return {std::nullopt, why};
  return {sim::DecodeKernelFacts{.splits = splits,
                                 .keys_per_step = k::bc(d),
                                 .page_size = page_size,
                                 .rows_per_block = k::kMaxRowsPerBlock,
                                 .stages = k::stages(d),
                                 .warps = k::kWarps,
                                 .threads = k::kThreads,
                                 .blocks_per_sm = k::kBlocksPerSm,
                                 .dtype = dtype,
                                 .state_floats = k::state_floats(d),
                                 .combine_rows_per_block = k::kCombineRowsPerBlock,
                                 .combine_threads = k::kCombineThreads,
                                 .split_ends_rows = k::split_kernel_ends_rows(splits, queue),
                                 .stores = {.state_u = sim_store(k::kStateUStore),
                                            .state_ml = sim_store(k::kStateMlStore),
                                            .o = sim_store(k::combine_o_store(c_dtype(dtype))),
                                            .lse = sim_store(k::kCombineLseStore),
                                            .lone_split_lse = sim_store(k::kLoneSplitLseStore),
                                            .state_header = k::kWorkspaceHeaderBytes},
                                 .persistent_blocks = queue ? sm_count * k::kBlocksPerSm : 0,
                                 .piece_first_step = queue ? &piece_first_step : nullptr,
                                 .merge_rows_per_pass = queue ? k::kQueuePassRows : 0,
                                 .claim_bytes = queue ? k::kQueueClaimBytes : 0,
                                 .sm_count = sm_count},
          ""};
}

Index decode_splits(const DecodeRun& run, const sim::HardwareProfile& profile) {
  if (run.lengths.empty()) return 1;  // refused by the mirror, which says why
  const Index longest = *std::max_element(run.lengths.begin(), run.lengths.end());
  if (run.queue) return gpu::decode::auto_pieces(longest);
  return gpu::decode::auto_splits(Index(run.lengths.size()), run.kv_heads, run.group, run.n_q,
                                  longest, /*paged=*/run.page_size > 0, profile.sm_count);
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
  const DecodeFacts f = decode_kernel_facts(run.d, dtype, splits, run.page_size, run.queue,
                                            target_profile().sm_count);
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

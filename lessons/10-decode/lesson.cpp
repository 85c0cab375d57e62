// Lesson 10: decode. One new query token against a long KV cache: why the work must be
// split along the keys, why the split results merge exactly, and what a token costs in bytes;
// then the forward kernels' unsplit sweep and the split-KV decode kernel on a GPU
// (gpu_decode.cpp).
#include "10-decode/book_data.hpp"
#include "10-decode/gpu_decode.hpp"
#include "gpu_bridge/gpu_step.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <cmath>

namespace flashlab::app {

namespace {

constexpr std::uint64_t kSeed = 10;
// ANCHORS.md's decode shape: batch 8, 32 query heads over 8 KV heads, d = 128, bf16.
constexpr Index kBatch = 8, kHeadsQ = 32, kHeadsKV = 8, kD = 128;
constexpr double kBf16 = 2, kFp32 = 4;

void parallelism(LessonContext& ctx) {
  ctx.step("One query leaves the GPU idle");
  const auto& h200 = sim::find_profile("h200");
  constexpr Index kBr = 128, kPrefillN = 8192;
  const Index prefill_units = kBatch * kHeadsQ * (kPrefillN / kBr);
  const Index decode_units = kBatch * kHeadsKV;  // a KV head's query heads share one block
  ctx.print("In prefill (N = {} queries) the FA2 loop has one independent query tile per\n"
            "(batch, head, Br = {} rows): {} thread blocks for the {} SMs of an H200.\n"
            "In decode each (batch, KV head) has one query row per query head and nothing else:\n"
            "{} blocks, each sweeping the whole cache alone. {} of {} SMs would sit idle.\n\n"
            "Split-KV cuts each cache into n_splits segments, one block each: B H_kv n_splits\n"
            "blocks, then a small combine step merges the n_splits states.\n\n",
            kPrefillN, kBr, prefill_units, h200.sm_count, decode_units,
            h200.sm_count - std::min<Index>(decode_units, h200.sm_count), h200.sm_count);
  Table t({"n_splits", "blocks", "blocks per SM", "partial state bytes (fp32)"});
  for (Index n_splits : {1, 2, 4, 8, 16, 32}) {
    const Index blocks = decode_units * n_splits;
    // Each block writes (m, l, U) for each of its query heads: d + 2 fp32 numbers per head.
    const double partial = double(kBatch * kHeadsQ * n_splits) * (kD + 2) * kFp32;
    t.add({fmt::format("{}", n_splits), fmt::format("{}", blocks),
           fmt::format("{:.2f}", double(blocks) / h200.sm_count), num(partial, 3)});
  }
  ctx.table(t);
}

constexpr Index kCache = 4099;  // prime-ish: segments of unequal length

}  // namespace

DecodeMergeExample decode_merge_example() {
  const auto in = random_inputs({.N = kCache, .d = 64, .seed = kSeed});
  return {in.Q.topRows(1).cast<double>(), in.K.cast<double>(), in.V.cast<double>()};
}

namespace {

void exact_merge(LessonContext& ctx) {
  ctx.step("The segments merge exactly, in any tree");
  const auto [q, K, V] = decode_merge_example();
  const auto exact = cpu::naive_attention<double>(q, K, V);
  ctx.print("One query against a cache of {} keys, d = 64, fp64. Each segment's state (m, l, U)\n"
            "is computed alone and the states are merged (lesson 2) in three tree shapes:\n\n",
            kCache);
  Table t({"n_splits", "chain: max err", "balanced tree", "random tree"});
  for (Index n_splits : {1, 3, 16, 64, 1024}) {
    std::vector<std::string> row{fmt::format("{}", n_splits)};
    for (const auto order : {cpu::MergeOrder::left_to_right, cpu::MergeOrder::balanced_tree,
                             cpu::MergeOrder::random_tree}) {
      const auto r =
          cpu::decode<double>(q, K, V, {.splits = n_splits, .order = order, .order_seed = kSeed});
      row.push_back(num((r.O - exact.O).cwiseAbs().maxCoeff(), 3));
    }
    t.add(row);
  }
  ctx.table(t);
  ctx.say("Every tree gives attention over all keys; the trees differ only in rounding.\n\n");
}

void bytes_per_token(LessonContext& ctx) {
  ctx.step("Bytes per token: decode is a memory-bound read of the cache");
  const auto& h200 = sim::find_profile("h200");
  ctx.print("Each new token reads the whole K and V cache once: 2 N_k H_kv d bf16 numbers per\n"
            "batch entry, and does about 4 N_k d FLOPs per query head with them. B = {}, {}\n"
            "query heads over {} KV heads, d = {}; the bound is bytes / {:.2f} TB/s:\n\n",
            kBatch, kHeadsQ, kHeadsKV, kD, h200.hbm_bytes_per_s / 1e12);
  Table t({"cache N_k", "KV bytes read", "FLOPs", "FLOPs per byte", "time bound", "steps/s bound"});
  for (Index N_k : {4096, 32768, 131072}) {
    const double bytes = 2.0 * double(N_k) * kHeadsKV * kD * kBf16 * kBatch;
    const double flops = 4.0 * double(N_k) * kD * kHeadsQ * kBatch;
    const double seconds = bytes / h200.hbm_bytes_per_s;
    t.add({fmt::format("{}", N_k), num(bytes, 4), num(flops, 4), num(flops / bytes, 3),
           fmt::format("{:.1f} us", seconds * 1e6), num(1.0 / seconds, 4)});
  }
  ctx.table(t);
  ctx.print("A step produces one token per batch entry. {} FLOPs per byte, against the {:.0f} an\n"
            "H200 can do per byte it reads: the matrix units wait on memory. GQA helps directly:\n"
            "{} query heads share each KV head, so the cache is read once for all of them.\n"
            "ANCHORS.md measured flash-attn's decode at 4.1 TB/s for N_k = 32768 on the H200:\n"
            "close to the bound, which is all decode can hope for.\n\n",
            num(4.0 * kHeadsQ / (2.0 * kHeadsKV * kBf16), 3),
            h200.matrix_flops_per_s / h200.hbm_bytes_per_s, kHeadsQ / kHeadsKV);
}

}  // namespace

void run_lesson_10(LessonContext& ctx) {
  parallelism(ctx);
  exact_merge(ctx);
  bytes_per_token(ctx);
  constexpr Index kGpuCache = 32768;
  gpu_side_by_side(ctx,
                   {.N = kGpuCache,
                    .N_q = 1,
                    .d = kD,
                    .causal = cpu::Causal::bottom_right,
                    .kernels = {"naive", "fa2"},
                    .what_it_shows = fmt::format(
                        "The forward kernels have no split-KV path: one block sweeps the whole "
                        "cache on one SM, the unsplit case of step 1. Set the time against the {} "
                        "of K and V it reads; the next step splits it.",
                        sim::format_bytes(2.0 * kGpuCache * kD * kBf16))});
  gpu_decode_step(ctx);
  ctx.finish("back to `flashlab lessons`, or the exercises: `flashlab exercise`.");
}

}  // namespace flashlab::app

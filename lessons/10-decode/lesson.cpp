// Lesson 10: decode. One new query token against a long KV cache: why the work must be
// split along the keys, why the split results merge exactly, and what a token costs in bytes;
// then the forward kernels' unsplit sweep and the split-KV decode kernel on a GPU
// (gpu_decode.cpp); then PagedAttention beside it: the memory pages save against contiguous
// reservation, the block table and what reading it costs (paged_cache.*), the measured cost.
#include "10-decode/book_data.hpp"
#include "10-decode/gpu_decode.hpp"
#include "10-decode/paged_cache.hpp"
#include "gpu_bridge/block_table.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "gpu_bridge/gpu_step.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/decode_kernel.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <functional>
#include <queue>
#include <vector>

namespace flashlab::app {

namespace {

constexpr std::uint64_t kSeed = 10;
using namespace decode_shape;
constexpr double kBf16 = 2;

void parallelism(LessonContext& ctx) {
  ctx.step("One query leaves the GPU idle");
  const auto& h200 = sim::find_profile("h200");
  constexpr Index kBr = gpu::fa2::kBr, kPrefillN = 8192;
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
  Table t({"n_splits", "blocks", "blocks per SM", "partial states written and read (fp32)"});
  for (Index n_splits : {1, 2, 4, 8, 16, 32}) {
    const Index blocks = decode_units * n_splits;
    // Each block writes (m, l, U) for each of its query heads, d + 2 fp32 numbers padded to
    // whole sectors, and the combine reads them back: as step 5 counts them on the GPU.
    t.add({fmt::format("{}", n_splits), fmt::format("{}", blocks),
           fmt::format("{:.2f}", double(blocks) / h200.sm_count),
           num(state_bytes(kBatch, kHeadsQ, kNq, kD, int(n_splits)), 3)});
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
  ctx.print(
      "Each new token reads the whole K and V cache once: 2 N_k H_kv d bf16 numbers per\n"
      "batch entry, and does about 4 N_k d FLOPs per query head with them. B = {}, {}\n"
      "query heads over {} KV heads, d = {}; the time at the pace of a measured\n"
      "device-to-device copy, bytes / {:.2f} TB/s (its bytes read + written, ANCHORS.md):\n\n",
      kBatch, kHeadsQ, kHeadsKV, kD, h200.hbm_bytes_per_s / 1e12);
  Table t({"cache N_k", "KV bytes read", "FLOPs", "FLOPs per byte", "time at a copy's pace",
           "steps/s"});
  for (Index N_k : {4096, 32768, 131072}) {
    const double bytes = 2.0 * double(N_k) * kHeadsKV * kD * kBf16 * kBatch;
    const double flops = 4.0 * double(N_k) * kD * kHeadsQ * kBatch;
    const double seconds = bytes / h200.hbm_bytes_per_s;
    t.add({fmt::format("{}", N_k), num(bytes, 4), num(flops, 4), num(flops / bytes, 3),
           fmt::format("{:.1f} us", seconds * 1e6), num(1.0 / seconds, 4)});
  }
  ctx.table(t);
  const auto& longest = measured::kAnchorDecode.back();
  ctx.print(
      "A step produces one token per batch entry. {} FLOPs per byte, against the {:.0f} an\n"
      "H200 can do per byte it reads: the matrix units wait on memory. GQA helps directly:\n"
      "{} query heads share each KV head, so the cache is read once for all of them.\n"
      "A copy's pace is a guide, not a wall: a copy reads and writes at once, and a kernel\n"
      "that only reads goes faster. At N_k = {} torch's flash decode read {:.2f} TB/s and\n"
      "cuDNN's {:.2f}\n  ({}),\n"
      "flashlab's split-KV decode {:.2f} (step 8's table).\n\n",
      num(4.0 * kHeadsQ / (2.0 * kHeadsKV * kBf16), 3),
      h200.matrix_flops_per_s / h200.hbm_bytes_per_s, kGroup, longest.length, longest.flash,
      longest.cudnn, measured::kAnchorDecodeSource.run,
      measured::decode_contiguous(longest.length));
}

// Bytes of K and V a key costs in one layer's cache: K and V, H_kv heads of d, bf16.
double kv_bytes_per_key() { return 2.0 * kHeadsKV * kD * kBf16; }

void paged_memory(LessonContext& ctx) {
  ctx.step("PagedAttention: memory reserved against memory used");
  constexpr std::int64_t kMaxLen = 32768;
  // A batch of requests as a server sees them: short chats, long documents, one at the limit.
  const std::vector<std::int64_t> lengths{1, 17, 97, 113, 1023, 4000, 12345, kMaxLen};
  const std::span<const Index> pages(kPageSizes);
  ctx.print("A server that keeps each request's cache in one contiguous piece must reserve, when\n"
            "the request arrives, room for the longest it may become: max_len = {} keys here.\n"
            "PagedAttention (Kwon et al. 2023, vLLM) gives out pages of a few keys as the\n"
            "sequence grows, so a sequence wastes only the unused end of its last page. Keys\n"
            "wasted for each request (a key costs {} of K and V per layer: {} KV heads,\n"
            "d = {}, bf16):\n\n",
            kMaxLen, sim::format_bytes(kv_bytes_per_key()), kHeadsKV, kD);
  std::vector<std::string> header{"length", "contiguous"};
  for (const auto p : pages) header.push_back(fmt::format("pages of {}", p));
  Table t(header);
  for (const std::int64_t len : lengths) {
    const std::span<const std::int64_t> one(&len, 1);
    std::vector<std::string> row{fmt::format("{}", len),
                                 fmt::format("{}", contiguous_use(one, kMaxLen).wasted())};
    for (const auto p : pages) row.push_back(fmt::format("{}", paged_use(one, p).wasted()));
    t.add(row);
  }
  const CacheUse whole = contiguous_use(lengths, kMaxLen);
  std::vector<std::string> share{"wasted share",
                                 fmt::format("{:.1f}%", 100 * whole.wasted_share())};
  std::vector<std::string> bytes{"reserved",
                                 sim::format_bytes(whole.reserved * kv_bytes_per_key())};
  for (const auto p : pages) {
    const CacheUse u = paged_use(lengths, p);
    share.push_back(fmt::format("{:.2f}%", 100 * u.wasted_share()));
    bytes.push_back(sim::format_bytes(u.reserved * kv_bytes_per_key()));
  }
  t.add(share);
  t.add(bytes);
  ctx.table(t);
  const CacheUse largest_pages = paged_use(lengths, pages.back());
  ctx.print("The {} keys these requests hold need {} per layer; contiguous reservation sets\n"
            "aside {}. Pages waste at most page_size - 1 keys per sequence, so the memory\n"
            "reserved for this batch contiguously holds {:.1f} such batches in pages of {}, and\n"
            "a larger batch is what turns each read of the cache into more tokens per second.\n\n",
            whole.used, sim::format_bytes(whole.used * kv_bytes_per_key()),
            sim::format_bytes(whole.reserved * kv_bytes_per_key()),
            double(whole.reserved) / double(largest_pages.reserved), pages.back());
}

// The queue's count model: items in queue order, each to the slot (a resident block) that
// frees first, every slot streaming a tile in the same time. The busiest slot's tiles over
// the mean: what the last block to end costs against a perfect balance.
double busiest_over_mean(const std::vector<std::int64_t>& items, std::int64_t slots) {
  std::priority_queue<std::int64_t, std::vector<std::int64_t>, std::greater<>> free_at;
  for (std::int64_t k = 0; k < slots; ++k) free_at.push(0);
  std::int64_t busiest = 0, total = 0;
  for (const std::int64_t tiles : items) {
    const std::int64_t end = free_at.top() + tiles;
    free_at.pop();
    free_at.push(end);
    busiest = std::max(busiest, end);
    total += tiles;
  }
  return double(busiest) * double(slots) / double(total);
}

// The work items, in tiles, of `sequences` sequences of `tiles` tiles each cut into `count`
// parts by a kernel's rule (first_tile: kernel_info's split_first_tile or piece_first_tile),
// part-major: every sequence's part 0, then every part 1, ... (the queue's order; the split
// grid's blocks all start at once, so their order does not matter).
std::vector<std::int64_t> work_items(std::int64_t sequences, std::int64_t tiles, int count,
                                     int (*first_tile)(std::int64_t, std::int64_t, std::int64_t)) {
  std::vector<std::int64_t> items;
  for (int j = 0; j < count; ++j)
    for (std::int64_t s = 0; s < sequences; ++s)
      items.push_back(first_tile(tiles, count, j + 1) - first_tile(tiles, count, j));
  return items;
}

void queue_for_unequal_sms(LessonContext& ctx) {
  namespace dk = gpu::decode;
  const auto& h200 = sim::find_profile("h200");
  const std::int64_t slots = h200.sm_count * dk::kBlocksPerSm;
  const std::int64_t sequences = blocks_a_split(kBatch);
  const std::int64_t tiles = (measured::kDecodeQueueLength + dk::kBc - 1) / dk::kBc;
  const int splits = dk::auto_splits(kBatch, kHeadsKV, kGroup, kNq, measured::kDecodeQueueLength,
                                     /*paged=*/false, h200.sm_count);
  const std::vector<std::int64_t> split_blocks =
      work_items(sequences, tiles, splits, dk::split_first_tile);
  ctx.print("The queue grid (05_decode_queue.cu, grid = queue) is that: {} blocks, {} an SM, each\n"
            "taking its next item, a piece of one sequence, from an atomic counter; a sequence's\n"
            "pieces shrink along it (piece j of P in proportion to 2 (P - j) - 1), and the queue\n"
            "hands them out piece-major, so the large ones start first and whichever SM is free\n"
            "takes the next. With every slot streaming at the same pace, the count model (each\n"
            "item in order to the slot that frees first) gives the busiest slot over the mean:\n"
            "the split grid's {} equal blocks on {} slots {:.3f}; the queue's, below. Measured\n"
            "({}), TB/s of K and V:\n\n",
            slots, dk::kBlocksPerSm, sequences * splits, slots,
            busiest_over_mean(split_blocks, slots), measured::kDecodeQueueSource.tool);
  Table t({"pieces", "items", "busiest / mean", "TB/s", "vs the split grid"});
  for (const auto& r : measured::kDecodeQueue)
    t.add({r.automatic ? fmt::format("auto: {}", r.pieces) : fmt::format("{}", r.pieces),
           fmt::format("{}", sequences * r.pieces),
           fmt::format("{:.3f}", busiest_over_mean(
                                     work_items(sequences, tiles, r.pieces, dk::piece_first_tile),
                                     slots)),
           fmt::format("{:.2f}", r.tbps),
           fmt::format("{:.3f}", r.tbps / measured::kDecodeQueueSplitGrid)});
  ctx.table(t);
  ctx.print("(the split grid {:.2f}, cuDNN {:.2f} in the same turns.) The model promises up to\n"
            "3% on equal SMs, and more on the tiers above; the GPU gave it back and more.\n"
            "Cut into equal pieces, one item a block (the split grid's very work), the queue's\n"
            "loop ran at {:.3f} of the split grid: the copy cursor's bookkeeping on every tile.\n"
            "And each item's start (its claim, its sequence's length, its Q: a round trip to\n"
            "memory each, microseconds under a full load of K and V) costs about a microsecond,\n"
            "so 64 pieces lose to 32. The split grid stays the default; `flashlab simulate --pass\n"
            "decode --grid queue` mirrors the queue, and `compare` runs it beside its mirror.\n\n",
            measured::kDecodeQueueSplitGrid, measured::kDecodeQueueCudnn,
            measured::kDecodeQueueEqualPieces / measured::kDecodeQueueEqualSplitGrid);
}

// Where the splits meet: the combine as a kernel of its own against the last split block of
// each group merging them, as measured.
void where_splits_merge(LessonContext& ctx) {
  const auto& src = measured::kDecodeMergeWhereSource;
  ctx.print("The splits' states meet in the combine, a kernel of its own (05_decode_combine.cu).\n"
            "It could be folded into the split kernel instead: each block counts itself done on a\n"
            "counter of its (sequence, KV head), after a fence that makes its state visible, and\n"
            "the block that counts last reads the others' states and writes O. One launch fewer,\n"
            "no wait for the whole grid to end. Measured\n({}), TB/s of K and V:\n\n",
            src.tool);
  Table t({"cache L", "combine kernel", "last block merges", "last / combine"});
  for (const auto& m : measured::kDecodeMergeWhere) {
    const double combine = (m.combine_kernel[0] + m.combine_kernel[1]) / 2;
    const double last = (m.last_block[0] + m.last_block[1]) / 2;
    t.add({fmt::format("{}", m.length), fmt::format("{:.2f}", combine),
           fmt::format("{:.2f}", last), fmt::format("{:.3f}", last / combine)});
  }
  ctx.table(t);
  ctx.say("The folded merge loses, most where the call is short (by do_bench, whose flush\n"
          "leaves the L2 dirty, the two were level). The reading that fits, not measured\n"
          "further: the combine's blocks are launched as the split kernel starts and wait on the\n"
          "SMs (a programmatic dependent launch), so when the splits end they load the states at\n"
          "once; the last split block pays its fence, then the counter's round trip, then the\n"
          "states' round trip, one after the other, at the end of the call.\n\n");
}

// What the combine costs when there is little to merge: one split, and more splits than it
// loads at once.
void little_to_merge(LessonContext& ctx) {
  const auto& lone = measured::kDecodeLoneSplitSource;
  ctx.print("The combine is worth its launch only when there is something to merge. With one\n"
            "split there is not: the split kernel's own merge of its warps can end the rows,\n"
            "O = U / l and LSE, with the very arithmetic the combine would apply to one state\n"
            "(beta = 1, alpha = 0, the same bits), and the call launches no combine\n"
            "(kernel_info.hpp, decode::split_kernel_ends_rows). Measured ({}),\n"
            "{}, TB/s of K and V:\n\n",
            lone.shape, lone.tool);
  Table t({"B", "cache L", "rows ended in the split kernel", "through the combine", "ratio"});
  for (const auto& m : measured::kDecodeLoneSplit)
    t.add({fmt::format("{}", m.batch), fmt::format("{}", m.length),
           fmt::format("{:.2f}", m.ends_rows), fmt::format("{:.2f}", m.through_combine),
           fmt::format("{:.3f}", m.ends_rows / m.through_combine)});
  ctx.table(t);
  namespace dk = gpu::decode;
  const auto& h200 = sim::find_profile("h200");
  const std::int64_t wave = h200.sm_count * dk::kBlocksPerSm;
  // The split counts at B sequences of the longest measured cache: the wave rule's alone
  // (dk::fewest_filling_splits) and the rule's as it stands (dk::auto_splits).
  const std::int64_t length = measured::kDecodeCombineGroups.back().length;
  const auto wave_rule = [&](std::int64_t batch) {
    return dk::fewest_filling_splits(blocks_a_split(batch), wave, dk::split_cap(length));
  };
  const std::int64_t wave1 = wave_rule(1);
  const int rule1 = dk::auto_splits(1, kHeadsKV, kGroup, kNq, length, false, h200.sm_count);
  const auto& groups = measured::kDecodeCombineGroupsSource;
  ctx.print(
      "\nThe gain is the combine's fixed cost, a launch and a round trip to the L2, about\n"
      "2 us: a share of a short call, nothing of a long one. The same cost grows with the\n"
      "splits: the combine loads the states of {} splits of a row at once, and each group\n"
      "beyond the first is one more round trip for every row. At B = 1 the wave rule asks\n"
      "for {} splits ({} blocks, {} an SM); {} fill one block an SM in one group.\n"
      "Measured ({}),\n{}, TB/s:\n\n",
      dk::kCombineSplitsInFlight, wave1, wave1 * blocks_a_split(1), dk::kBlocksPerSm, rule1,
      groups.shape, groups.tool);
  Table g({"cache L", fmt::format("{} splits (one group)", rule1),
           fmt::format("{} splits (two)", wave1), "ratio", "cuDNN"});
  for (const auto& m : measured::kDecodeCombineGroups)
    g.add({fmt::format("{}", m.length), fmt::format("{:.2f}", m.one_group),
           fmt::format("{:.2f}", m.two_groups), fmt::format("{:.3f}", m.one_group / m.two_groups),
           fmt::format("{:.2f}", m.cudnn)});
  ctx.table(g);
  ctx.print(
      "\nSo the rule (decode::auto_splits) keeps to one group where one block an SM fills\n"
      "{}% of the SMs, and takes the wave's count only where it cannot. Exercise: at B = 2\n"
      "the wave rule takes {} splits, one group already. What would one block an SM ask\n"
      "for? Predict its time against {} splits, then read what it measured\n"
      "(bench/RESULTS.md, the tenth run, \"Split counts by batch\").\n\n",
      dk::min_wave_share_percent(), wave_rule(2), wave_rule(2));
}

void unequal_sms(LessonContext& ctx) {
  ctx.step("Equal blocks, unequal SMs: where the split blocks end");
  const auto& e = measured::kDecodeBlockEnds;
  ctx.print("Every split block of the automatic count does the same work: the same number of\n"
            "keys, the same instructions. A build of the split kernel that logs where and when\n"
            "each block ran ({}) shows, at\n  {}\n  ({}):\n\n",
            e.source.tool, e.source.shape, e.source.run);
  Table t({"first block ends", "10%", "median", "90%", "last block ends"});
  t.add({fmt::format("{:.0f} us", e.first), fmt::format("{:.0f} us", e.p10),
         fmt::format("{:.0f} us", e.median), fmt::format("{:.0f} us", e.p90),
         fmt::format("{:.0f} us", e.last)});
  ctx.table(t);
  // Had every block kept the pace of all of them together, the call would have ended when
  // the whole work was done at that pace.
  const double balanced = e.first / e.done_at_first;
  ctx.print("The blocks start within 0.1 us of each other and end {:.0f}% apart. Which block\n"
            "ends early is set by its SM: the two SMs of a TPC (SM 2k and 2k + 1) end within\n"
            "10 us of each other in {} of {} pairs, and the SMs fall in tiers. The log shows\n"
            "the tiers, not their cause; the likely one: an SM's loads reach the L2 through its\n"
            "GPC, whose path its SMs share, and a GPU's GPCs need not all have the same number of\n"
            "working SMs, so where fewer share it each streams faster.\n"
            "When the first block ended, {:.0f}% of the work was done; at that pace a balanced\n"
            "grid would end at {:.0f} us, {:.3f} of the {:.0f} us the last block took. The rest\n"
            "of the time, fewer and fewer blocks cannot keep DRAM busy.\n\n",
            100 * (e.last / e.first - 1), e.tpc_pairs_alike, e.tpc_pairs,
            100 * e.done_at_first, balanced, balanced / e.last, e.last);
  const auto& src = measured::kDecodeManySplitsSource;
  ctx.print("Smaller blocks would let the block scheduler hand the last work to the SMs that are\n"
            "free. Measured ({}), TB/s of K and V:\n\n",
            src.tool);
  Table m({"num_splits", "blocks", "TB/s", "vs cuDNN"});
  const std::int64_t per_split = blocks_a_split(kBatch);
  for (const auto& r : measured::kDecodeManySplits)
    m.add({r.automatic ? fmt::format("auto: {}", r.splits) : fmt::format("{}", r.splits),
           fmt::format("{}", per_split * r.splits),
           fmt::format("{:.2f}", r.tbps),
           fmt::format("{:.3f}", r.tbps / measured::kDecodeManySplitsCudnn)});
  ctx.table(m);
  ctx.say("More blocks do not win it back: each block starts with its first tiles in flight and\n"
          "nothing of its own behind them, and ends draining its last tile and merging its\n"
          "warps' states; past one wave those starts and ends cost more than the tail they\n"
          "save. A balance that pays neither needs blocks that stay and take piece after piece\n"
          "of the cache from a queue, their copies running on from one piece into the next.\n\n");
  queue_for_unequal_sms(ctx);
  where_splits_merge(ctx);
  little_to_merge(ctx);
}

void paged_reads(LessonContext& ctx) {
  ctx.step("The block table, and what reading through it costs");
  constexpr std::int64_t kExamplePage = 64, kExampleLen = 1000, kShown = 8;
  const BlockTable example = shuffled_block_table(2, kExampleLen, kExamplePage, kSeed);
  std::string row;
  for (std::int64_t p = 0; p < kShown; ++p)
    row += fmt::format("{}{}", p ? " " : "", example.table[std::size_t(p)]);
  ctx.print("The cache becomes one pool of pages; the block table maps sequence b's page p (its\n"
            "keys [p page_size, (p + 1) page_size)) to a page of the pool. For 2 sequences of {}\n"
            "keys in pages of {}, shuffled as an allocator leaves them after many requests,\n"
            "sequence 0's first {} pages live at pages {} of the pool.\n\n",
            kExampleLen, kExamplePage, kShown, row);
  const int tile = gpu::decode::bc(kD);
  const std::int64_t row_blocks = gpu::decode::row_blocks(kGroup, kNq);
  const auto& h200 = sim::find_profile("h200");
  ctx.print(
      "The decode kernel (05_decode_split_kv.cu) copies K and V in tiles of {} keys; each\n"
      "thread's keys of a tile lie on one page, so it looks up one entry a tile, a tile\n"
      "ahead of the copy that needs it, and a block reads the entries of the pages its\n"
      "split touches, whole 32-byte sectors of them through its SM's L1. Per decoding\n"
      "step of ANCHORS.md's shape (B = {}, {} KV heads, one token, the split count the\n"
      "kernel picks on {} SMs), table bytes into the SMs, as the decode's mirror counts\n"
      "them, against K and V:\n\n",
      tile, kBatch, kHeadsKV, h200.sm_count);
  // The block table's bytes into the SMs by the decode's mirror (the sectors of each split's
  // entries, simulator/src/decode_kernel_program.cpp), for B sequences of `cache` keys.
  const auto table_read = [&](std::int64_t batch, std::int64_t cache, int splits,
                              std::int64_t page) {
    const DecodeFacts f = decode_kernel_facts(kD, sim::DType::bf16, splits, page);
    if (!f.facts) throw std::logic_error("lesson 10's decode mirror: " + f.why_not);
    const sim::DecodeShape shape{.lengths = std::vector<Index>(std::size_t(batch), cache),
                                 .heads_kv = kHeadsKV,
                                 .group = kGroup,
                                 .n_q = kNq,
                                 .d = kD};
    return double(sim::count_decode_kernel(shape, *f.facts).tensor("block table").read);
  };
  Table t({"cache L", "page", "splits", "table size", "table bytes read", "K, V bytes",
           "table / K, V"});
  for (const auto& m : measured::kDecodePaged) {
    const int splits = gpu::decode::auto_splits(m.batch, kHeadsKV, kGroup, kNq, m.cache,
                                                /*paged=*/true, h200.sm_count);
    for (const std::int64_t page : {64, 256}) {
      const double entry = sizeof(std::int32_t);
      const double table_size = double(m.batch) * double((m.cache + page - 1) / page) * entry;
      const double read = table_read(m.batch, m.cache, splits, page);
      const double kv = double(m.batch) * double(m.cache) * kv_bytes_per_key() * double(row_blocks);
      t.add({fmt::format("{}", m.cache), fmt::format("{}", page), fmt::format("{}", splits),
             sim::format_bytes(table_size), sim::format_bytes(read), sim::format_bytes(kv),
             fmt::format("{:.3f}%", 100 * read / kv)});
    }
  }
  ctx.table(t);
  const auto& src = measured::kDecodePagedSource;
  ctx.print("The bytes are nothing. Measured bandwidth of K and V in TB/s ({}),\n"
            "  at {}\n  ({}):\n\n",
            src.tool, src.shape, src.run);
  Table m({"B", "cache L", "contiguous", "pages of 64", "cost", "pages of 256", "cost"});
  for (const auto& r : measured::kDecodePaged)
    m.add({fmt::format("{}", r.batch), fmt::format("{}", r.cache),
           fmt::format("{:.2f}", r.contiguous), fmt::format("{:.2f}", r.paged64),
           fmt::format("{:.0f}%", 100 * (1 - r.paged64 / r.contiguous)),
           fmt::format("{:.2f}", r.paged256),
           fmt::format("{:.0f}%", 100 * (1 - r.paged256 / r.contiguous))});
  ctx.table(m);
  ctx.say("So the price of pages is not the table's bytes but what they stand for: a load whose\n"
          "address is known only after another load has returned, and K and V arriving from\n"
          "scattered pages instead of one long run. Smaller pages pay it more often. The merge\n"
          "of split states does not change at all: a split's keys may lie on any pages.\n\n");
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
  unequal_sms(ctx);
  paged_memory(ctx);
  paged_reads(ctx);
  ctx.finish("lesson 11: inside the fa2 kernel, or the exercises: `flashlab exercise`.");
}

}  // namespace flashlab::app

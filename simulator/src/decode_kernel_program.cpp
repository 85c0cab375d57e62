// flashlab's GPU decode as built (split-KV, flash-decoding), counted kernel by kernel.
//
//   1. split kernel  a block per (sequence, KV head, split): reads the n_q query rows of
//                    all G query heads of its group (GQA packing: each byte of K and V is
//                    read once for all of them), streams its split's share of the cache,
//                    keys_per_step keys of K and V a step (paged: through the sequence's
//                    block table, one int32 entry per page it touches), and writes its
//                    partial state (m, l, U) in fp32 for each of its n_q G rows
//   2. combine       a warp per query row (b, h, i), combine_rows_per_block consecutive
//                    rows a block (a block per (sequence, query head) where the facts do
//                    not say): reads the partial state of every split of its row, merges
//                    them (cpu::merge's algebra) and writes O (input dtype) and LSE (fp32)
// The shares: a sequence of L keys takes s = ceil(L / Bc) steps (Bc = keys_per_step); each
// split takes q = ceil(s / S) of them, in order, so W = ceil(s / q) splits have keys and
// the last of those the ragged rest; the S - W others (all S when L = 0) read nothing and
// write the empty state (m = -inf, l = 0, U = 0), which the combine reads like any other.
// A causal mask (bottom-right, n_q > 1) changes no count: the kernel loads every key of
// the split and computes the whole tile.
//
// Closed form, per sequence of length L, b = input bytes, f = 4 (fp32), G query heads per
// KV head, H_kv KV heads, rows = n_q G, R = ceil(rows / rows_per_block) row blocks per
// (sequence, KV head) (R = 1 when rows_per_block is 0 or at least rows), page size P:
//   Q          read     H_kv W rows d b
//   K, V       read     H_kv R L d b each        (every key once per row block, whatever S)
//   block table read    H_kv R 32 sum over working splits of the sectors of the entries it
//                       reads: pages floor(a / P) .. floor((e - 1) / P) for keys [a, e),
//                       4 bytes each, in the sequence's row of the table (row b starts
//                       4 b ceil(L_max / P) bytes in: the rows as compare lays them out, the
//                       table sector-aligned); a block reads its entries through its SM's
//                       L1, so each sector once a block (blocks of other KV heads reading the
//                       same entries on the same SM are not taken out: an upper bound there).
//                       Where every split's entries start and end on sectors, 4 bytes an
//                       entry: H_kv 4 (ceil(L / P) + W - 1) when shares do not end on a page
//                       (measured on an H100, 2026-12-06: 12 entries a split, 48 bytes,
//                       always over two sectors, 64 bytes a block)
//   partial    written  H_kv S rows (d + 2) f    read  the same (by the combine); with the
//                       states padded to whole sectors (state_floats, the kernel as built)
//                       both are H_kv S rows state_floats f, the sectors the stores and
//                       the combine's loads touch
//   O          written  H_kv rows d b
//   LSE        written  H_kv rows f
// and per sector of the lengths array (8 sequences' int32 lengths; the kernel's seq_lens),
//   lengths    read     32 min(its blocks, sm_count)   (each block reads its sequence's
//                       length through its SM's L1, a sector once an SM; its blocks: those
//                       of its sequences, H_kv R S each on the split grid, at most the
//                       queue's blocks on the queue grid). Exact where the array is one
//                       sector (B <= 8: 4,096 bytes for 128 blocks, 4,224 for 256 blocks on
//                       132 SMs, as measured); beyond, the blocks of a sector are taken to be
//                       on different SMs, an upper bound
// With one split on the split grid and split_ends_rows (the kernel as built), the split
// kernel's merge writes O and LSE itself: no partial state is written or read (the tensor's
// row is left at 0), each block
// stores its rows' LSE in one run (lone_split_lse: the sectors of the run at its place in
// the array, 1 a block of G = 4 rows with one query), and there is no combine launch; the
// finalize's operations are the same, in the split kernel.
// Out of the SMs, the written bytes are the sectors of the stores when the facts give them
// (DecodeStores; warp_store.hpp). As built (each state padded to whole sectors, a multiple
// of 8 floats): a state's U goes out in runs of 32 floats, whole sectors, and its m and l in
// one 8-byte store, alone in the state's last sector; so d / 8 + 1 sectors a state, 17 at
// d = 128 (544 bytes for 520 of data), O its data, LSE (B, H_q, n_q) one array stored 8
// consecutive rows a sector, 32 ceil(B H_q n_q / 8) bytes (32 a row with one float a
// store). Packed at d + 2 floats, a state starts 8 k bytes past a sector (k its index, d a
// multiple of 8), a run of U touches 5 sectors where it does not start on one, and m and l
// cost a sector each: with d = 128 four states in a row send
// 16 + 3 x 20 sectors of U and 4 x 2 of m and l, 2688 bytes for 2080 of data.
// Operations: per working split of k keys in t steps, S = Q K^T and U += W V (2 rows k d
// FLOPs each) and the online-softmax update (update_ops per step: rows k + rows t exps);
// per row of the combine, S - 1 merges (merge_ops) and the finalize (finalize_ops).
// Grid: the split kernel's B H_kv R S blocks, of which sum over sequences of H_kv R W have
// keys; its waves and busy SMs on a profile follow (kernel_pass.hpp).
// SRAM of one split block: max(stages x 2 Bc d b (the ring of K and V tiles), warps x
// rows_per_block x (d + 2) f (the warps' states, packed, merged at the end over the idle
// ring)).
// The queue grid (persistent_blocks > 0, 05_decode_queue.cu): the same work per item as a
// split's, the split s of the formulas above the piece, with its own first step (the facts'
// piece_first_step; W the pieces with keys). Its grid is min(B H_kv R S, persistent_blocks)
// blocks, all busy; each claims one item at its start and one at the end of every item, an
// atomic add on a 4-byte counter: B H_kv R S + blocks claims, each a sector out of the SMs
// and a sector back (kClaimBytes, warp_store.hpp; not among the stores issued). SRAM: the
// ring, plus warps x merge_rows_per_pass x (d + 2) f for the merge beside it, plus
// claim_bytes.
//
// Counts only: the numbers of decode are cpu_reference's (decode.hpp), which splits and
// merges with the same algebra; the mirror books the bytes and the work.
#include "flashlab/sim/decode_kernel.hpp"

#include "program.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/sim/limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace flashlab::sim {

namespace {

using cpu::Index;

constexpr Index kMaxHeads = Index{1} << 12;
constexpr Bytes kFp32 = bytes_of(kAccumulator);
constexpr Bytes kTableEntryBytes = 4;     // int32 page index
constexpr Bytes kLengthBytes = 4;         // int32 length of a sequence
constexpr Index kLengthsPerSector = kSectorBytes / kLengthBytes;
constexpr Index kStateFloatsBeyondU = 2;  // m and l beside U's d floats
constexpr Index kMaxStages = 64;
constexpr Index kMaxWarps = 32;
constexpr Index kWarpLanes = 32;  // threads a warp: a block holds at most kMaxWarps of them

// One block's SRAM: the ring of stages x (K, V) tiles of keys_per_step keys, in the input
// dtype; at the end the same memory holds the warps' states for their merge, warps x
// rows_per_block x (U (d), m, l) fp32 (and a lone split's LSE, rows_per_block floats). The
// larger of the two.
// The queue grid's block: the ring, and beside it the merge's rows of a pass and the claim.
Bytes split_block_sram(Index d, const DecodeKernelFacts& f) {
  if (f.stages == 0) return 0;
  const Bytes ring = f.stages * 2 * f.keys_per_step * d * bytes_of(f.dtype);
  const Index merge_rows = f.merge_rows_per_pass > 0 ? f.merge_rows_per_pass : f.rows_per_block;
  // A lone split that ends its rows keeps their LSE beside the merge, a float a row.
  const Bytes merge = f.warps * merge_rows * (d + kStateFloatsBeyondU) * kFp32 +
                      (f.split_ends_rows ? merge_rows * kFp32 : 0);
  if (f.merge_rows_per_pass > 0) return ring + merge + f.claim_bytes;
  return std::max(ring, merge);
}

Index ceil_div(Index a, Index b) { return (a + b - 1) / b; }

void check_range(std::string_view name, Index value, Index min, Index max) {
  if (value < min || value > max)
    throw cpu::InvalidArgument(
        fmt::format("{} = {} is out of range: the decode mirror takes {} <= {} <= {}", name, value,
                    min, name, max));
}

// What one sequence's split-kernel blocks of one KV head move and compute.
struct SequenceCounts {
  Index working = 0;        // splits with keys (W)
  Bytes table_read = 0;     // the sectors of the block-table entries the splits read
  OpCounts ops{};
};

// The first step of split (or piece) j of a sequence of `steps` steps.
Index first_step(Index steps, Index j, const DecodeKernelFacts& f) {
  if (f.piece_first_step != nullptr) return f.piece_first_step(steps, f.splits, j);
  return std::min(j * ceil_div(steps, f.splits), steps);  // equal splits
}

// `table_row`: where the sequence's row of the block table starts, in bytes.
SequenceCounts sequence_counts(Index L, Index rows, Index d, const DecodeKernelFacts& f,
                               Bytes table_row) {
  SequenceCounts c;
  const Index Bc = f.keys_per_step, steps = ceil_div(L, Bc);
  if (steps == 0) return c;
  for (Index s = 0; s < f.splits; ++s) {
    const Index a = first_step(steps, s, f) * Bc, e = std::min(first_step(steps, s + 1, f) * Bc, L);
    if (a >= e) continue;  // a split or piece with no keys
    ++c.working;
    const Index t = ceil_div(e - a, Bc);
    if (f.page_size > 0) {  // the entries of pages a / P .. (e - 1) / P, whole sectors
      const Index pages = (e - 1) / f.page_size - a / f.page_size + 1;
      c.table_read += kSectorBytes * sectors_touched(table_row + a / f.page_size * kTableEntryBytes,
                                                     pages * kTableEntryBytes);
    }
    c.ops += detail::score_ops(rows, e - a, d);
    c.ops += detail::update_ops(rows, e - a, d);
    c.ops += detail::update_ops(rows, 0, d).times(t - 1);  // the per-step terms, once per step
  }
  return c;
}

// `bytes` from byte `start` on, accessed `step` bytes at a time (0: all at once), as the
// bytes of the sectors each access touches (warp_store.hpp).
Bytes span_sectors(Bytes start, Bytes bytes, Bytes step) {
  if (step == 0) step = bytes;
  Bytes n = 0;
  for (Bytes at = 0; at < bytes; at += step)
    n += sectors_touched(start + at, std::min(step, bytes - at));
  return n * kSectorBytes;
}

// The sum of `cost(start)` over `count` partial states laid `stride` bytes apart from byte
// `header` of the workspace. The offsets of the states past a sector repeat with a period of
// at most 32 states, so each offset is costed once and counted.
template <class Cost>
Bytes over_states(Index count, Bytes stride, Bytes header, Cost cost) {
  const Index period = kSectorBytes / std::gcd(stride, kSectorBytes);
  Bytes out = 0;
  for (Index k = 0; k < std::min(period, count); ++k) {
    const Index alike = (count - k + period - 1) / period;  // states k, k + period, ...
    out = cpu::checked_add(out,
                           cpu::checked_mul(alike, cost(header + k * stride), "the states' bytes"),
                           "the states' bytes");
  }
  return out;
}

// Bytes out of the SMs for the states: each state's U by `state_u`'s runs, then its m and l
// (8 bytes) by `state_ml`'s stores, the sectors each instruction touches; their data where
// the facts give no stores.
Bytes states_out(Index count, Index d, Bytes stride, const DecodeStores& w) {
  const Bytes u_bytes = d * kFp32, ml_bytes = kStateFloatsBeyondU * kFp32;
  if (!w.state_u || !w.state_ml)
    return cpu::checked_mul(count, u_bytes + ml_bytes, "the states' bytes");
  return over_states(count, stride, w.state_header, [&](Bytes start) {
    return span_sectors(start, u_bytes, w.state_u->run_bytes()) +
           span_sectors(start + u_bytes, ml_bytes, w.state_ml->run_bytes());
  });
}

// Bytes into the SMs for the states, read by the combine: the sectors of each state's data
// (U, m, l), each sector crossing once (the combine loads a state once, U and then m and l in
// one 8-byte load); a state padded to whole sectors is read whole.
Bytes states_in(Index count, Index d, Bytes stride, Bytes header) {
  const Bytes data = (d + kStateFloatsBeyondU) * kFp32;
  return over_states(count, stride, header,
                     [&](Bytes start) { return span_sectors(start, data, 0); });
}

// Bytes out of the SMs for LSE where a lone split ends its rows: each block stores the LSE
// of its packed rows, which are consecutive rows (b, h, i) of the array, in one run
// (`store`: bytes_per_thread a row, up to `threads` rows), at their place in the array. The
// (sequence, KV head) pairs' rows follow one another, `rows` a pair, cut into row blocks.
Bytes lone_split_lse_out(Index pairs, Index rows, Index rows_per_block, const WarpStore& store) {
  const Bytes row_bytes = store.bytes_per_thread;
  const Index per_block = std::min<Index>(rows_per_block, store.threads);
  return over_states(pairs, rows * row_bytes, 0, [&](Bytes start) {
    Bytes sectors = 0;
    for (Index r0 = 0; r0 < rows; r0 += per_block)
      sectors +=
          sectors_touched(start + r0 * row_bytes, std::min(per_block, rows - r0) * row_bytes);
    return sectors * kSectorBytes;
  });
}

// Floats from one state to the next: the facts', or packed.
Index state_stride_floats(Index d, const DecodeKernelFacts& f) {
  return f.state_floats > 0 ? f.state_floats : d + kStateFloatsBeyondU;
}

}  // namespace

void check(const DecodeShape& s, const DecodeKernelFacts& f) {
  check_range("batch", s.batch(), 1, kMaxDecodeBatch);
  for (const Index L : s.lengths) check_range("a sequence's length", L, 0, kMaxDecodeLength);
  check_range("heads_kv", s.heads_kv, 1, kMaxHeads);
  check_range("group", s.group, 1, kMaxHeads);
  check_range("n_q", s.n_q, 1, kMaxDecodeQueries);
  check_range("d", s.d, 1, kMaxHeadDim);
  check_range("splits", f.splits, 1, kMaxDecodeSplits);
  check_range("keys_per_step", f.keys_per_step, 1, kMaxDecodeLength);
  check_range("page_size", f.page_size, 0, kMaxDecodeLength);
  check_range("rows_per_block", f.rows_per_block, 0, kMaxDecodeQueries * kMaxHeads);
  check_range("state_header", f.stores.state_header, 0, kMaxDecodeLength);
  if (f.state_floats != 0)
    check_range("state_floats", f.state_floats, s.d + kStateFloatsBeyondU, kMaxHeadDim * 2);
  for (const auto* store : {&f.stores.state_u, &f.stores.state_ml, &f.stores.o, &f.stores.lse,
                            &f.stores.lone_split_lse})
    if (*store) check(**store);
  check_range("stages", f.stages, 0, kMaxStages);
  check_range("warps", f.warps, 1, kMaxWarps);
  check_range("blocks_per_sm", f.blocks_per_sm, 1, kMaxWarps);
  check_range("combine_rows_per_block", f.combine_rows_per_block, 0, kMaxWarps);
  check_range("combine_threads", f.combine_threads, 0, kMaxWarps * kWarpLanes);
  check_range("persistent_blocks", f.persistent_blocks, 0, kMaxDecodeBatch * kMaxHeads);
  check_range("merge_rows_per_pass", f.merge_rows_per_pass, 0, kMaxDecodeQueries * kMaxHeads);
  check_range("claim_bytes", f.claim_bytes, 0, kMaxDecodeLength);
  check_range("sm_count", f.sm_count, 0, kMaxDecodeBatch * kMaxHeads);
  if (f.split_ends_rows && (f.splits != 1 || f.persistent_blocks > 0))
    throw cpu::InvalidArgument(fmt::format(
        "split_ends_rows with {} splits{}: only one split on the split grid ends its rows in "
        "the split kernel (splits = 1, persistent_blocks = 0)",
        f.splits, f.persistent_blocks > 0 ? " on the queue grid" : ""));
  if (f.piece_first_step != nullptr)  // the rule must cover every sequence in order
    for (const Index steps : {Index{0}, Index{1}, Index{7}, Index{4096}}) {
      Index at = f.piece_first_step(steps, f.splits, 0);
      bool ok = at == 0 && f.piece_first_step(steps, f.splits, f.splits) == steps;
      for (Index j = 1; ok && j <= f.splits; ++j) {
        const Index next = f.piece_first_step(steps, f.splits, j);
        ok = next >= at;
        at = next;
      }
      if (!ok)
        throw cpu::InvalidArgument(fmt::format(
            "piece_first_step does not cut {} steps into {} pieces in order (piece 0 must start "
            "at 0, each where the one before ends or later, the last end at {})",
            steps, f.splits, steps));
    }
}

PassReport count_decode_kernel(const DecodeShape& s, const DecodeKernelFacts& f) {
  check(s, f);
  const Index d = s.d, b = bytes_of(f.dtype), S = f.splits, H = s.heads_kv;
  const Index rows = s.n_q * s.group;  // per (sequence, KV head)
  const Index R = f.rows_per_block > 0 ? ceil_div(rows, f.rows_per_block) : 1;  // row blocks
  const Index max_length = *std::max_element(s.lengths.begin(), s.lengths.end());
  // The block table's rows: the pages of the longest sequence each.
  const Index table_row_entries = f.page_size > 0 ? ceil_div(max_length, f.page_size) : 0;
  Index keys = 0, working = 0;
  Index sequences_with_keys = 0;  // the others' splits read nothing, not even Q
  Bytes table_read = 0;
  OpCounts ops;
  for (Index seq = 0; seq < s.batch(); ++seq) {
    const Index L = s.lengths[std::size_t(seq)];
    const SequenceCounts c =
        sequence_counts(L, rows, d, f, seq * table_row_entries * kTableEntryBytes);
    keys = cpu::checked_add(keys, L, "the keys");
    sequences_with_keys += L > 0;
    working += c.working;
    table_read += c.table_read;
    ops += c.ops;
  }
  const Index B = s.batch(), state_floats = d + kStateFloatsBeyondU;
  const Index stride = state_stride_floats(d, f);
  const auto bytes = [](std::initializer_list<Index> factors) {
    return cpu::checked_product(factors, "the decode's bytes");
  };
  // Read by the combine: the sectors of the states' data where the facts give their layout,
  // else the data.
  const Index states = bytes({B, H, S, rows});
  const Bytes state_read = f.state_floats > 0
                               ? states_in(states, d, stride * kFp32, f.stores.state_header)
                               : bytes({states, state_floats, kFp32});
  // Out of the SMs: a row of O has its own stores (a warp per row); LSE goes out as one
  // array of the (b, h, i) rows, in runs of its store's pattern.
  const auto out = [](const std::optional<WarpStore>& store, Bytes data) {
    return store ? bytes_out(*store, data) : data;
  };

  const bool queue = f.persistent_blocks > 0;
  const Index blocks_per_sequence = H * R * S;  // the split grid's blocks, the queue's items
  const Index items = B * blocks_per_sequence;
  const Index queue_blocks = queue ? std::min(items, f.persistent_blocks) : 0;
  const Index claims = items + queue_blocks;

  const bool ends_rows = f.split_ends_rows;  // one split, no states, no combine
  const Index rows_per_block = f.rows_per_block > 0 ? f.rows_per_block : rows;
  const Bytes lse_written =
      !ends_rows ? out(f.stores.lse, bytes({B, H, rows, kFp32}))
      : f.stores.lone_split_lse
          ? lone_split_lse_out(B * H, rows, rows_per_block, *f.stores.lone_split_lse)
          : bytes({B, H, rows, kFp32});

  PassReport r;
  r.pass = "decode";
  r.label = fmt::format(
      "{} {}{}{}, {} keys a step, {}, {}", S, queue ? "piece" : "split", S == 1 ? "" : "s",
      queue ? fmt::format(" on a queue of {} blocks", queue_blocks) : "", f.keys_per_step,
      f.page_size > 0 ? fmt::format("pages of {}", f.page_size) : std::string("contiguous cache"),
      to_string(f.dtype));
  const std::string in_type(to_string(f.dtype)), fp32(to_string(kAccumulator));
  r.tensors = {
      {"Q", in_type, B * H * rows * d, bytes({H, working, rows, d, b}), 0},
      {"K", in_type, keys * H * d, bytes({H, R, keys, d, b}), 0},
      {"V", in_type, keys * H * d, bytes({H, R, keys, d, b}), 0},
      {"block table", "int32", B * table_row_entries, bytes({H, R, table_read}), 0},
      ends_rows ? PassTensor{"partial state", fp32, 0, 0, 0}
                : PassTensor{"partial state", fp32, B * H * S * rows * state_floats, state_read,
                             states_out(states, d, stride * kFp32, f.stores)},
      {"O", in_type, B * H * rows * d, 0, bytes({B, H, rows, out(f.stores.o, d * b)})},
      {"LSE", fp32, B * H * rows, 0, lse_written},
  };
  // The lengths: a block reads its sequence's through its SM's L1, so a sector of
  // kLengthsPerSector sequences comes in once for each SM that runs one of their blocks.
  Bytes lengths_read = 0;
  for (Index first = 0; first < B; first += kLengthsPerSector) {
    const Index sequences = std::min(kLengthsPerSector, B - first);
    Index blocks = sequences * blocks_per_sequence;
    if (queue) blocks = std::min(blocks, queue_blocks);
    lengths_read += kSectorBytes * (f.sm_count > 0 ? std::min(blocks, f.sm_count) : blocks);
  }
  r.tensors.push_back({"lengths", "int32", B, lengths_read, 0});
  if (queue) {
    const Bytes claimed = bytes({claims, kClaimBytes});
    r.tensors.push_back({.name = "queue counter",
                         .type = "uint32",
                         .elements = 1,
                         .read = claimed,
                         .written = claimed,
                         .written_by_atomics = claimed});
  }
  r.ops = ops.times(H);
  OpCounts combine = detail::merge_ops(1, d).times(S - 1);
  combine += detail::finalize_ops(1, d);
  r.ops += combine.times(B * H * rows);
  r.peak_sram = split_block_sram(d, f);
  // Each launch's footprint, every sector once (compulsory_dram): the split kernel reads the
  // Q of the sequences with keys (an empty one's O = 0 and LSE = -inf need none), every key of
  // K and V, the lengths' sectors and the block table's entries, and writes the states (or,
  // ending its rows, O and LSE); the combine reads the states and writes O and LSE.
  const std::vector<Footprint> rows_out = {{"O", bytes({B, H, rows, d, b})},
                                           {"LSE", bytes({B, H, rows, kFp32})}};
  Launch split = queue
                     ? Launch{"queue", queue_blocks, queue_blocks, f.threads, f.blocks_per_sm}
                     : Launch{"split", B * H * R * S, H * R * working, f.threads, f.blocks_per_sm};
  split.reads = {{"Q", bytes({sequences_with_keys, H, rows, d, b})},
                 {"K", bytes({keys, H, d, b})},
                 {"V", bytes({keys, H, d, b})},
                 {"lengths", bytes({ceil_div(B, kLengthsPerSector), kSectorBytes})}};
  if (f.page_size > 0) {  // each page's entry once, whichever splits and KV heads read it
    Index pages = 0;
    for (const Index L : s.lengths) pages += ceil_div(L, f.page_size);
    split.reads.push_back({"block table", bytes({pages, kTableEntryBytes})});
  }
  if (queue) {  // the counter's one sector, read and written by the atomics
    split.reads.push_back({"queue counter", kSectorBytes});
    split.writes.push_back({"queue counter", kSectorBytes});
  }
  if (ends_rows) {
    split.writes.insert(split.writes.end(), rows_out.begin(), rows_out.end());
    r.launches.push_back(split);
    return r;
  }
  split.writes.push_back({"partial state", state_read});
  r.launches.push_back(split);
  const Index combine_blocks = f.combine_rows_per_block > 0
                                   ? ceil_div(B * H * rows, f.combine_rows_per_block)
                                   : B * s.heads_q();
  Launch merge{"combine", combine_blocks, combine_blocks, f.combine_threads};
  merge.reads = {{"partial state", state_read}};
  merge.writes = rows_out;
  r.launches.push_back(merge);
  return r;
}

}  // namespace flashlab::sim

// The mirror of flashlab's GPU decode as built (split-KV, flash-decoding, GQA packing, paged
// or contiguous KV cache), counts only; the program and its closed forms are in
// simulator/src/decode_kernel_program.cpp.
#pragma once

#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/warp_store.hpp"

#include <optional>

#include <vector>

namespace flashlab::sim {

// The problem: a batch of sequences, each with n_q new query rows (1, or up to 16 for
// speculative decoding) in heads_kv x group query heads, against its own cache of
// lengths[b] keys in heads_kv KV heads (a length may be 0: that sequence's O is 0 and its
// LSE -inf, as the CPU reference's). The batch is lengths.size().
struct DecodeShape {
  std::vector<cpu::Index> lengths{4096};
  cpu::Index heads_kv = 1;
  cpu::Index group = 1;  // query heads per KV head (GQA); heads_q = heads_kv x group
  cpu::Index n_q = 1;
  cpu::Index d = 128;

  cpu::Index batch() const { return cpu::Index(lengths.size()); }
  cpu::Index heads_q() const { return heads_kv * group; }
};

// The warp stores of the pass's kernels (kernel_info.hpp's decode::), so that their writes
// are booked as the sectors they send out of the SMs (warp_store.hpp); an absent one is
// booked as bytes of data. The partial states lie one after another, state_header bytes
// into the workspace, DecodeKernelFacts::state_floats apart: packed at d + 2 floats a
// state's U starts where the one before ended, not always on a sector; padded to whole
// sectors (the kernel as built) every state starts on one.
struct DecodeStores {
  std::optional<WarpStore> state_u{};       // split kernel: U of a state, lanes along it
  std::optional<WarpStore> state_ml{};      // split kernel: m and l (8 bytes), after U
  std::optional<WarpStore> o{};             // combine (or a lone split that ends its rows): O
  std::optional<WarpStore> lse{};           // combine: LSE, runs of consecutive rows
  std::optional<WarpStore> lone_split_lse{};  // a lone split ending its rows: LSE, a block's rows
  Bytes state_header = 0;                   // workspace bytes before the first state
};

// The kernel's facts (its description gives them; the split count is the kernel's choice
// from the SM count, batch, heads and length, which the mirror takes as an input).
struct DecodeKernelFacts {
  cpu::Index splits = 1;          // blocks per (sequence, KV head)
  cpu::Index keys_per_step = 64;  // keys of K and V loaded per step of a block's loop
  cpu::Index page_size = 0;       // tokens per page of a paged cache; 0: contiguous
  cpu::Index rows_per_block = 0;  // packed query rows (n_q x group) a block takes; a (sequence,
                                  // KV head) with more takes several row blocks, each of which
                                  // reads K and V again. 0: all of them in one block
  cpu::Index stages = 0;          // K and V tiles (keys_per_step keys each) in the block's
                                  // SRAM ring; 0: SRAM not booked
  cpu::Index warps = 1;           // each keeps its own state; merged in SRAM at the end
  int threads = 0;                // per block of the split kernel (reported, not counted)
  int blocks_per_sm = 1;          // split (or queue) blocks an SM holds at once: its waves
  DType dtype = DType::bf16;      // of Q, K, V and O
  cpu::Index state_floats = 0;    // floats from one partial state to the next in the
                                  // workspace: U (d), m, l and any padding; 0: d + 2, packed
  // The combine's blocks (reported, not counted): query rows (b, h, i) a block, a warp a
  // row, and threads; rows 0: not described, a block per (sequence, query head).
  cpu::Index combine_rows_per_block = 0;
  int combine_threads = 0;
  // One split on the split grid whose merge ends the rows itself: the split kernel writes O
  // and LSE, no state goes through the workspace and no combine is launched (the kernel as
  // built: kernel_info's decode::split_kernel_ends_rows). Needs splits = 1 and no queue.
  bool split_ends_rows = false;
  DecodeStores stores{};
  // The queue grid (gpu/kernels/05_decode_queue.cu) where persistent_blocks > 0: that many
  // blocks (or fewer, one per item) take the work items (piece, KV head, row block, sequence)
  // from a counter in the workspace, one atomic claim per item plus one per block; `splits`
  // is then the pieces per sequence, piece j of a sequence of s steps starting at step
  // piece_first_step(s, splits, j) (null: equal splits, as the split grid); the warps' merge
  // takes merge_rows_per_pass packed rows at a time in SRAM beside the ring, and claim_bytes
  // more hand the claim to the block's threads.
  cpu::Index persistent_blocks = 0;
  cpu::Index (*piece_first_step)(cpu::Index steps, cpu::Index pieces, cpu::Index piece) = nullptr;
  cpu::Index merge_rows_per_pass = 0;
  Bytes claim_bytes = 0;
  // The SMs the split kernel's blocks run on (0: as many as its blocks). Each block reads its
  // sequence's length (an int32 of the lengths array) by a plain load, through its SM's L1,
  // which holds it for the SM's later blocks: a sector of the array comes in once an SM.
  cpu::Index sm_count = 0;
};

// Limits of the mirror's inputs, for callers that check their own options against them.
inline constexpr cpu::Index kMaxDecodeSplits = 1024;
inline constexpr cpu::Index kMaxDecodeQueries = 256;
inline constexpr cpu::Index kMaxDecodeLength = (cpu::Index{1} << 31) - 1;  // an int32 index
inline constexpr cpu::Index kMaxDecodeBatch = cpu::Index{1} << 16;

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, unless the
// batch has 1 to kMaxDecodeBatch sequences, each length is in [0, kMaxDecodeLength], heads_kv,
// group, n_q, d, keys_per_step are >= 1 (n_q <= kMaxDecodeQueries, d <= 2^12), 1 <= splits <=
// kMaxDecodeSplits, page_size >= 0, 0 <= stages <= 64, 1 <= warps <= 32 and state_floats is 0
// or d + 2 to 2^13 (twice the largest d).
void check(const DecodeShape& shape, const DecodeKernelFacts& facts);

// The split kernel and the combine, counted per sequence in closed form: microseconds for
// any length.
PassReport count_decode_kernel(const DecodeShape& shape, const DecodeKernelFacts& facts);

}  // namespace flashlab::sim

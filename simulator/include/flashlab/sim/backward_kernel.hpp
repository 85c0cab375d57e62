// The mirror of flashlab's GPU backward as built (FlashAttention-2's order), counts only; the
// program and its closed forms are in simulator/src/backward_kernel_program.cpp.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/warp_store.hpp"

#include <optional>

#include <string_view>

namespace flashlab::sim {

// The problem: batch x heads_q query heads of N_q rows, sharing heads_kv KV heads of N_k
// keys (GQA: heads_q / heads_kv query heads per KV head; MQA: heads_kv = 1), head dim d.
struct BackwardShape {
  cpu::Index batch = 1;
  cpu::Index heads_q = 1;
  cpu::Index heads_kv = 1;
  cpu::Index n_q = 1024;
  cpu::Index n_k = 1024;
  cpu::Index d = 64;
  cpu::Causal causal = cpu::Causal::none;
};

// The kernel's own facts, as its description gives them (the caller fills them in; the
// simulator does not include gpu/).
// The warp stores of the pass's kernels (kernel_info.hpp's fa2_backward::), so that their
// writes are booked as the sectors they send out of the SMs (warp_store.hpp); an absent one
// is booked as bytes of data.
struct BackwardStores {
  std::optional<WarpStore> dk_dv{};              // main kernel: dK, dV at the end
  std::optional<WarpStore> dq_reduction{};       // main kernel: red.global.add into the accumulator
  std::optional<WarpStore> d{};                  // preprocess: D
  std::optional<WarpStore> accumulator_zeros{};  // preprocess: the accumulator set to 0
  std::optional<WarpStore> dq{};                 // convert: dQ (atomic mode)
  std::optional<WarpStore> dq_kernel{};          // dQ kernel: dQ (deterministic mode)
  // Times each step's dQ_i is reduced into the accumulator: 1, or 2 where two warpgroups
  // each add all of d (v3 at d = 64 before its exchange; kernel_info.hpp says which now).
  int dq_reduction_passes = 1;
};

struct BackwardKernelFacts {
  cpu::Index Br = 64;          // query rows per step of the main kernel's loop
  cpu::Index Bc = 64;          // keys per block of the main kernel
  int threads = 0;             // per block of the main kernel (reported, not counted)
  Bytes sram_bytes = 0;        // per block of the main kernel (reported, not counted)
  DType dtype = DType::bf16;   // of Q, K, V, O, dO, dQ, dK, dV
  bool deterministic = false;  // dQ by its own kernel instead of fp32 atomics
  // The dQ kernel's own tiles (deterministic mode): query rows a block and keys a KV tile
  // (kernel_info.hpp's fa2_backward::kDqBr, kDqBc); 0: the main kernel's Br and Bc.
  cpu::Index dq_Br = 0, dq_Bc = 0;
  int dq_threads = 0;  // per block of the dQ kernel (reported, not counted)
  // Blocks an SM holds at once (Launch::per_sm): the main kernel's and the dQ kernel's.
  int blocks_per_sm = 1, dq_blocks_per_sm = 1;
  // The pre- and post-kernels' blocks (reported, not counted): query rows a block and threads
  // (kernel_info.hpp's fa2_backward::kPreprocessRowsPerBlock, a warp a row, and
  // kPreprocessThreads); rows 0: not described, a block per query tile of Br rows.
  cpu::Index pre_post_rows_per_block = 0;
  int pre_post_threads = 0;
  int pre_post_blocks_per_sm = 1;  // their blocks an SM holds at once (Launch::per_sm)
  BackwardStores stores{};
  // The main kernel: v2 (mma.sync) loads its K_j, V_j before it knows whether any query sees
  // them; v3 (wgmma, TMA) loads nothing in a block whose keys no query sees. v3 has no
  // deterministic mode (that call runs v2).
  bool skips_unseen_kv = false;
  // The main kernel's Q_i, dO_i, K_j and V_j come by TMA (v3), in whole boxes of Br and Bc
  // rows: the rows past N_q and N_k are zero-filled on chip and counted into the SMs as the
  // rest (as the forward's TMA copies were measured, fa3_kernel_program.cpp); false, only the
  // rows inside cross (v2's cp.async with zero-fill).
  bool tma_boxes = false;
  std::string_view main_kernel = "v2";  // named in the report's label
};

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, unless every
// size is >= 1 (N up to 2^22, d up to 2^12, batch x heads_q up to 2^20), heads_kv divides
// heads_q, Br, Bc >= 1 (dq_Br, dq_Bc >= 0), blocks per SM 1 to 64, dq_threads 0 to 1024, and
// skips_unseen_kv and tma_boxes only without deterministic.
void check(const BackwardShape& shape, const BackwardKernelFacts& facts);

// Every kernel of the pass counted in closed form over the KV tiles (and, deterministic,
// the query tiles): microseconds at any N.
PassReport count_backward_kernel(const BackwardShape& shape, const BackwardKernelFacts& facts);

}  // namespace flashlab::sim

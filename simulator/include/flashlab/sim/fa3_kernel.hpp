// The mirror of flashlab's Hopper forward kernel as built (gpu/kernels/06_fa3.cu: TMA, an
// mbarrier ring of K and V stages, two or three consumer warpgroups), counts only; the program and its
// closed forms are in simulator/src/fa3_kernel_program.cpp.
//
//   sim::PassReport r = sim::count_fa3_kernel(shape, facts);
//   r.tensor("K").read;   r.peak_sram;   r.launch("fa3").working;
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/warp_store.hpp"

#include <optional>

namespace flashlab::sim {

// The problem: batch x heads_q query heads of N_q rows, sharing heads_kv KV heads of N_k
// keys (GQA: heads_q / heads_kv query heads per KV head; MQA: heads_kv = 1), head dim d.
struct Fa3Shape {
  cpu::Index batch = 1;
  cpu::Index heads_q = 1;
  cpu::Index heads_kv = 1;
  cpu::Index n_q = 1024;
  cpu::Index n_k = 1024;
  cpu::Index d = 128;
  cpu::Causal causal = cpu::Causal::none;
};

// The kernel's own facts, as its description gives them (the caller fills them in from
// kernel_info.hpp's fa3::; the simulator does not include gpu/).
struct Fa3KernelFacts {
  cpu::Index Br = 128;           // query rows per block: consumer warpgroups x rows each
  cpu::Index Bc = 128;           // keys per K and V tile
  cpu::Index consumers = 2;      // consumer warpgroups, Br / consumers rows each
  cpu::Index stages = 2;         // K and V buffers in the ring
  cpu::Index q_buffers = 1;      // Q tiles in SRAM: with two, a persistent block's consumers
                                 // start an item under the last one's end (moves no byte)
  bool warp_specialized = true;  // a producer warpgroup issues the copies (reported; ping-pong
                                 // and intra-warpgroup overlap reorder work and move no byte)
  int threads = 0;               // per block (reported, not counted)
  Bytes align_slack = 0;         // SRAM reserved to round the base up to the swizzle atom
  Bytes barrier_bytes = 0;       // SRAM of the mbarriers (Q, full and empty per stage) and the
                                 // item slots beside them (moves no HBM byte)
  DType dtype = DType::bf16;     // of Q, K, V and O
  bool writes_lse = true;        // L = m + log l stored (fp32) beside O
  // The epilogue's warp stores of O and L (kernel_info.hpp's fa3::config): their writes are
  // booked as the sectors they send out of the SMs (warp_store.hpp); absent: bytes of data.
  std::optional<WarpStore> o_store{};
  std::optional<WarpStore> lse_store{};
  bool stages_o = false;         // O leaves through an SRAM tile sO (Br, d) and TMA stores
  bool skips_unseen = false;     // a consumer computes only the KV tiles its own rows see
                                 // (none where they start past N_q); else all the block loads
  bool work_queue = false;       // blocks claim their items from a counter after the first,
                                 // one atomic add per item in all (for a shape: the grid its
                                 // launch resolves, kernels.hpp's fa3_takes_from_queue)
};

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, unless every
// size is >= 1 (N up to 2^22, d up to 2^12, batch x heads_q up to 2^20), heads_kv divides
// heads_q, Br, Bc, stages, q_buffers >= 1, consumers divides Br, and the SRAM overheads
// are >= 0.
void check(const Fa3Shape& shape, const Fa3KernelFacts& facts);

// The grid walked query tile by query tile in closed form per tile: microseconds at any N.
// peak_sram is the block's SRAM as the kernel lays it out.
PassReport count_fa3_kernel(const Fa3Shape& shape, const Fa3KernelFacts& facts);

// The (Br / consumers, Bc) tiles the consumer warpgroups of the whole grid compute, the count
// count_fa3_kernel's work is made of: each consumer every KV tile its block loads, or
// (facts.skips_unseen) only those its own rows see. Throws as check does.
cpu::Index fa3_consumer_tiles(const Fa3Shape& shape, const Fa3KernelFacts& facts);

}  // namespace flashlab::sim

// flashlab's Hopper forward as built (gpu/kernels/06_fa3.cu), counted block by block.
//
// A block per (batch, query head, query tile i of Br rows); causal grids run the query tiles
// longest first, which changes when blocks run, not what they move. In each block:
//   producer    TMA brings Q_i once (one copy per 64-column slab, completing on the Q
//               barrier), then K_j and V_j for j = 0 .. Tc_i - 1 into a ring of `stages`
//               buffers each: tile j goes to buffer j mod stages once the consumers have
//               released tile j - stages (the ring's "empty" barrier) and signals "full";
//               without warp specialisation the first consumer warp issues the same copies
//   consumers   C warpgroups of R = Br / C rows each (two at d = 128, three at d = 64) run
//               S = Q_i K_j^T and U += W V_j as wgmma on whole (R, Bc) tiles, the online
//               softmax in registers (ping-pong and intra-warpgroup overlap reorder this
//               work; they move no byte): each consumer every tile the block loads, or
//               (facts.skips_unseen) only the tiles its own rows see, ceil(n_ic / Bc) with
//               n_ic the keys of its last row, none where its rows start past N_q
//   epilogue    O_i = U / l and L_i = m + log l straight from registers to HBM (no TMA
//               store, no SRAM staging), only the rows below N_q
// TMA moves whole boxes: a tile that runs past N_q or N_k is zero-filled on chip, and the
// bytes into the SMs (l1tex__m_xbar2l1tex_read_bytes) count its rows past the end as they
// count the rest (measured on an H100, 2026-12-05: N = 1,000, 3,000 and 5,000 at d = 128 and
// 64, one head and 16, read Tr Br rows of Q and Bc rows a KV tile, to within 0.01%; bench/
// RESULTS.md, "2026-12-05, night"). DRAM reads only the rows inside the tensor (the grid
// model's business, grid.hpp). Under a causal mask with offset o (top-left 0,
// bottom-right N_k - N_q) the block's last row e = min((i + 1) Br, N_q) - 1 sees
// n_i = clamp(e + o + 1, 0, N_k) keys, and the KV tiles past them are never loaded:
// Tc_i = ceil(n_i / Bc) tiles, the last of them masked in registers. Without a mask n_i = N_k.
// A block whose rows see no key (bottom-right, N_q > N_k) still loads Q_i and writes O_i = 0,
// L_i = -inf.
//
// Closed form. b = input bytes, f = 4 (fp32), B H_q query heads in all, Tr = ceil(N_q / Br)
// query tiles, and the key rows the blocks load, in whole tiles
//   KL   = Bc x sum over i of Tc_i     (no mask: Tr ceil(N_k / Bc) Bc)
//   Q  read     B H_q Tr Br d b
//   K  read     B H_q KL d b            (each query head reads its KV head's tiles itself: GQA
//   V  read     B H_q KL d b             shares K and V in HBM and in the L2, not on chip)
//   O  written  B H_q N_q d b
//   L  written  B H_q N_q f             (when the caller asks for the LSE)
//   queue counter  read and written B H_q Tr kClaimBytes  (facts.work_queue: each block's
//               producer claims its next item after the loads of each item it takes, the
//               last claim telling it the queue is done; an atomic add, a sector out and a
//               sector back, no store instruction: warp_store.hpp)
// Out of the SMs: where O is staged (facts.stages_o), TMA stores carry its rows whole, B H_q
// N_q d b, outside the L1's store pipe. Otherwise written bytes are the sectors of the
// epilogue's stores (finalize, one
// 32-bit pair per lane and row of the accumulator fragment: 8 rows x 16 bytes a warp
// instruction, 8 sectors, so O costs 2 B H_q N_q d b; L, 8 consecutive floats by one lane of
// each quad, costs B H_q 32 ceil(N_q / 8) where 8 divides N_q), when the facts give those
// stores (bytes_out_of_heads of warp_store.hpp: a head's L starts h N_q f bytes into the
// tensor, past a sector boundary where 8 does not divide N_q, and its runs of 8 rows then
// touch 2 sectors each: at N_q = 777 and 3 heads, 488 sectors of L against 294 from boundaries).
// Work as issued, per (R, Bc) tile a consumer computes (CT of them in all: C times the KV
// tiles loaded, or fewer where consumers skip): 2 products of 2 R Bc d FLOPs (whole tiles,
// zero-filled and masked rows included: the tensor cores compute them), R Bc exps and maxima
// and sums, R exps (alpha) and R (d + 1) rescales (U and l by alpha); per block Br d divides
// (O = U / l) and Br logs (L).
// SRAM per block, as the kernel carves it: align_slack + Br d b (sQ) + stages x 2 Bc d b (the
// K and V rings) + barrier_bytes, + Br d b (sO) where O is staged for its TMA stores.
//
// Counts only: the numbers of the forward are cpu_reference's; the mirror books the bytes
// and the work the kernel's schedule issues.
#include "flashlab/sim/fa3_kernel.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashlab::sim {

namespace {

using cpu::Index;

constexpr Index kMaxTile = Index{1} << 16;
constexpr Index kMaxStages = 64;
constexpr Bytes kMaxOverhead = Bytes{1} << 30;
constexpr Bytes kFp32 = bytes_of(kAccumulator);
constexpr std::int64_t kFlopsPerMultiplyAdd = 2;
constexpr std::int64_t kProducts = 2;  // S = Q K^T and U += W V

Index ceil_div(Index a, Index b) { return (a + b - 1) / b; }

void check_size(std::string_view name, Index value, Index low, Index max) {
  check_mirror_size("fa3", name, value, low, max);
}

// What one query head's blocks load, summed over its query tiles.
struct TileSums {
  Index tiles = 0;           // KV tiles loaded (Bc rows each of K and of V: the header's KL)
  Index working = 0;         // blocks that load at least one KV tile
  Index consumer_tiles = 0;  // CT: (R, Bc) tiles the consumers compute
};

TileSums tile_sums(const Fa3Shape& s, const Fa3KernelFacts& f) {
  const Index Br = f.Br, Bc = f.Bc, R = f.Br / f.consumers;
  const cpu::Mask mask{s.causal, s.n_q, s.n_k};
  const Index o = mask.diagonal_offset(), Tr = ceil_div(s.n_q, Br);
  // The KV tiles that rows before `end` need: up to the last row's keys.
  const auto tiles_seen = [&](Index end) {
    Index n_keys = s.n_k;
    if (s.causal != cpu::Causal::none)
      n_keys = std::clamp<Index>(std::min(end, s.n_q) - 1 + o + 1, 0, s.n_k);
    return ceil_div(n_keys, Bc);
  };
  TileSums sums;
  for (Index i = 0; i < Tr; ++i) {
    const Index Tc = tiles_seen((i + 1) * Br);  // n_i: the block's last row's keys
    sums.tiles += Tc;
    sums.working += Tc > 0 ? 1 : 0;
    for (Index c = 0; c < f.consumers; ++c) {
      const Index first = i * Br + c * R;
      sums.consumer_tiles +=
          !f.skips_unseen ? Tc : first < s.n_q ? tiles_seen(first + R) : 0;
    }
  }
  return sums;
}

}  // namespace

void check(const Fa3Shape& s, const Fa3KernelFacts& f) {
  check_size("batch", s.batch, 1, kMirrorMaxHeadsInAll);
  check_size("heads_q", s.heads_q, 1, kMirrorMaxHeadsInAll);
  check_size("heads_kv", s.heads_kv, 1, s.heads_q);
  check_size("N_q", s.n_q, 1, kMaxLength);
  check_size("N_k", s.n_k, 1, kMaxLength);
  check_size("d", s.d, 1, kMaxHeadDim);
  check_size("Br", f.Br, 1, kMaxTile);
  check_size("Bc", f.Bc, 1, kMaxTile);
  check_size("stages", f.stages, 1, kMaxStages);
  check_size("q_buffers", f.q_buffers, 1, kMaxStages);
  check_size("consumers", f.consumers, 1, f.Br);
  check_size("align_slack", f.align_slack, 0, kMaxOverhead);
  check_size("barrier_bytes", f.barrier_bytes, 0, kMaxOverhead);
  cpu::check_causal(s.causal);
  check_mirror_heads(s.batch, s.heads_q, s.heads_kv);
  if (f.o_store) check(*f.o_store);
  if (f.lse_store) check(*f.lse_store);
  if (f.Br % f.consumers != 0)
    throw cpu::InvalidArgument(fmt::format(
        "Br = {} does not split over {} consumer warpgroups: each takes Br / consumers rows", f.Br,
        f.consumers));
}

Index fa3_consumer_tiles(const Fa3Shape& s, const Fa3KernelFacts& f) {
  check(s, f);
  return cpu::checked_product({s.batch, s.heads_q, tile_sums(s, f).consumer_tiles},
                              "the consumers' tiles");
}

PassReport count_fa3_kernel(const Fa3Shape& s, const Fa3KernelFacts& f) {
  check(s, f);
  const Index Br = f.Br, Bc = f.Bc, d = s.d, b = bytes_of(f.dtype);
  const Index Hq = s.batch * s.heads_q, Hkv = s.batch * s.heads_kv;  // heads in all
  const TileSums sums = tile_sums(s, f);
  // A block a query tile of a head; with the work queue, as many items.
  const Index Tr = ceil_div(s.n_q, Br), blocks = cpu::checked_mul(Hq, Tr, "the blocks");
  const auto rows_of = [](Index heads, Index rows, Index cols, Index bytes) {
    return cpu::checked_product({heads, rows, cols, bytes}, "the fa3 kernel's bytes");
  };

  PassReport r;
  r.pass = "fa3";
  r.label = fmt::format("Br {} ({} consumer warpgroups), Bc {}, {} stage{}, {}{}, {} threads, {}",
                        Br, f.consumers, Bc, f.stages, f.stages > 1 ? "s" : "",
                        f.warp_specialized ? "warp-specialised" : "no producer warpgroup",
                        f.work_queue ? ", work queue" : "", f.threads, to_string(f.dtype));
  const auto tensor = [&](std::string name, DType dtype, Index n, Bytes read, Bytes written,
                          Bytes by_tma = 0) {
    r.tensors.push_back({std::move(name), std::string(to_string(dtype)), n, read, written, by_tma});
  };
  const Index q_elems = cpu::checked_product({Hq, s.n_q, d}, "Q's elements");
  const Index kv_elems = cpu::checked_product({Hkv, s.n_k, d}, "K's elements");
  tensor("Q", f.dtype, q_elems, rows_of(Hq, ceil_div(s.n_q, Br) * Br, d, b), 0);  // whole boxes
  const Index KL = cpu::checked_mul(sums.tiles, Bc, "the keys loaded");           // whole boxes
  tensor("K", f.dtype, kv_elems, rows_of(Hq, KL, d, b), 0);
  tensor("V", f.dtype, kv_elems, rows_of(Hq, KL, d, b), 0);
  // Out of the SMs: the sectors of finalize's stores, head by head, each head's where it
  // starts in the tensor (warp_store.hpp).
  const auto out = [&](const std::optional<WarpStore>& store, Index cols, Bytes bytes) {
    const Bytes head = rows_of(1, s.n_q, cols, bytes);
    return store ? bytes_out_of_heads(*store, head, Hq)
                 : cpu::checked_mul(Hq, head, "the fa3's writes");
  };
  if (f.stages_o) {  // TMA stores of sO: whole rows of O, its bytes of data
    const Bytes o_bytes = rows_of(Hq, s.n_q, d, b);
    tensor("O", f.dtype, q_elems, 0, o_bytes, o_bytes);
  } else {
    tensor("O", f.dtype, q_elems, 0, out(f.o_store, d, b));
  }
  if (f.writes_lse) tensor("L", kAccumulator, Hq * s.n_q, 0, out(f.lse_store, 1, kFp32));
  if (f.work_queue) {  // one claim per item: the blocks' first items are their indices
    const Bytes claims = cpu::checked_mul(blocks, kClaimBytes, "the queue's claims");
    r.tensors.push_back({.name = "queue counter",
                         .type = "uint64",
                         .elements = 1,
                         .read = claims,
                         .written = claims,
                         .written_by_atomics = claims});
  }

  // Work as issued: whole (R, Bc) tiles per tile a consumer computes, Br rows per block.
  const Index R = Br / f.consumers;
  const Index tiles = fa3_consumer_tiles(s, f);
  const Index scores = cpu::checked_product({tiles, R, Bc}, "the scores");
  r.ops.matrix_flops =
      cpu::checked_product({kFlopsPerMultiplyAdd, kProducts, scores, d}, "the fa3 kernel's FLOPs");
  r.ops.exp = scores + tiles * R + blocks * Br;  // W, alpha per tile; log l per block
  r.ops.max = scores;
  r.ops.sum = scores;
  r.ops.rescale = cpu::checked_product({tiles, R, d + 1}, "the rescales");
  r.ops.divide = cpu::checked_product({blocks, Br, d}, "the divides");

  r.launches.push_back({"fa3", blocks, Hq * sums.working, f.threads});
  r.peak_sram = f.align_slack + f.q_buffers * Br * d * b + f.stages * 2 * Bc * d * b +
                f.barrier_bytes + (f.stages_o ? Br * d * b : 0);
  return r;
}

}  // namespace flashlab::sim

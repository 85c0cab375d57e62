// 06_fa3_backward: the backward pass on Hopper's tensor cores (FlashAttention-3's backward),
// v3 of the backward's main kernel. The algebra is v2's (04_fa2_backward.cu):
//   S = Q K^T * scale,  P = exp(S - L),  dV = P^T dO,  dP = dO V^T,
//   dS = P o (dP - D) with D = rowsum(dO o O) (04_backward_preprocess.cu),
//   dQ = dS K * scale,  dK = dS^T Q * scale.
// What changes is how the products run. v2 feeds mma.sync from SRAM through ldmatrix, one
// warp's m16 slice at a time, and waits on every ldmatrix (the profile: HMMA stalled on
// LDSM, tensor pipe 41% active). Here a warpgroup (4 warps) issues wgmma, which reads its
// operands from SRAM itself (hopper/wgmma.cuh) and runs asynchronously:
//   - a block of 2 warpgroups owns Bc = 128 keys of one (batch, KV head); warpgroup w owns
//     keys [64 w, 64 w + 64) (wgmma's M = 64) and keeps their dK and dV (64, d) in fp32
//     accumulators for the whole loop over the GQA group's query heads and query tiles;
//   - per step (query tile Q_i, dO_i of Br = 64 rows, brought by TMA into the 128-byte
//     swizzle wgmma reads, double-buffered behind the step before):
//       S^T = K_w Q_i^T and dP^T = V_w dO_i^T, (64 keys, Br), A and B from SRAM;
//       P^T = exp(S^T * scale - L) and dS^T = P^T o (dP^T - D) in registers, rounded to T:
//       they are then exactly wgmma's A fragments (keys as M, queries as K), so
//       dV += P^T dO_i and dK += dS^T Q_i take them from registers (no SRAM round trip);
//       dS^T also goes to SRAM (sdS, (Bc, Br)), and dQ_i += dS K runs with dS^T and K both
//       read transposed from SRAM as m64n64 products (one 64-column slab of d each): at
//       d = 128 warpgroup w takes slab w of dQ_i over all Bc keys; at d = 64 (one slab: a
//       slab is the narrowest N a transposed operand in this swizzle is described with)
//       warpgroup w takes all of d over its own 64 keys, then hands the other warpgroup,
//       through SRAM (sdQx), the partial of the 32 columns that one adds, and adds the sum
//       of columns [32 w, 32 w + 32) of both. Each thread adds its share into the fp32
//       accumulator as 16-byte reductions (red.global.add.v4.f32), as v2 does.
// Why 2 warpgroups and no producer warpgroup: fa3_backward:: in kernel_info.hpp counts the
// registers (208 a thread at the peak, d = 128). Thread 0's warp issues the TMA copies
// (an elected lane) right after the step's barrier.
// Per step, per block: 5 products of 2 Br Bc d FLOPs (10 Br Bc d in all); loads Q_i, dO_i
// (2 Br d elements) and L_i, D_i (2 Br fp32); Br d fp32 reductions of dQ (at d = 64 after
// an exchange of Br d fp32 through SRAM and one more barrier). Whole problem, non-causal:
// the bytes of v2 (same Br, Bc): K, V read once, Q, dO, L, D once per KV tile,
// B Hq N_q d ceil(N_k / Bc) fp32 reductions, dK and dV written once.
// Causal: as v2, KV tile j starts at the first query tile that sees its first key; a
// warpgroup masks its S^T only where its 64 keys and the tile's rows cross the diagonal or
// the ragged ends.
// What is left on the table (FlashAttention-3 does these): no overlap between the steps (the
// next step's S^T waits for this step's dQ), no producer warpgroup, dQ by atomics rather
// than a TMA reduce-add of a whole tile.
// Covered: non-deterministic calls without dropout and with no row stride of 0
// (fa3_backward::takes); the others run v2. d = 64 and 128, bf16 and fp16, GQA/MQA, any
// N_q and N_k, causal in both alignments, strides as TMA takes them (multiples of 16 bytes).
#include "backward_steps.cuh"
#include "block_log.cuh"
#include "common.cuh"
#include "hopper/mbarrier.cuh"
#include "hopper/pipeline.cuh"
#include "hopper/tma.cuh"
#include "hopper/wgmma.cuh"
#include "launch_backward.hpp"
#include "ptx.cuh"

namespace flashlab::gpu {
namespace {

using backward_steps::QueryTiles;
using backward_steps::Step;
using fa3_backward::kBc;
using fa3_backward::kBr;
using fa3_backward::kBuffers;
using fa3_backward::kThreads;

constexpr int kSlab = fa3::kSlab;
constexpr int kWarpgroupThreads = fa3::kWarpgroupThreads;
constexpr int kM = fa3_backward::kKeysPerWarpgroup;  // keys per warpgroup
constexpr int kK = hopper::kWgmmaK;
static_assert(kM == hopper::kWgmmaM, "a warpgroup's keys are one wgmma M");
static_assert(kBr == kSlab, "a row of sdS^T (Br queries) is one 128-byte swizzled row");
static_assert(kThreads >= 2 * kBr, "threads [0, Br) copy L_i, threads [Br, 2 Br) copy D_i");
constexpr int kSRegs = kBr / 2;  // (64 keys, Br) fp32 over a warpgroup's 128 threads

template <class T, int D>
struct Tiles {
  static constexpr int kSlabs = D / kSlab;
  static constexpr int kKVElems = kBc * D;    // sK or sV (Bc, D)
  static constexpr int kQElems = kBr * D;     // one buffer of sQ or sdO (Br, D)
  static constexpr int kdSElems = kBc * kBr;  // sdS (Bc, Br)
  static constexpr uint32_t kKVBytes = kKVElems * sizeof(T);
  static constexpr uint32_t kQBytes = kQElems * sizeof(T);
  static_assert(D % kSlab == 0);
  static_assert((kM * kSlab * sizeof(T)) % fa3::kSwizzleAtom == 0 &&
                    (kBr * kSlab * sizeof(T)) % fa3::kSwizzleAtom == 0,
                "every slab, and every warpgroup's rows in it, start on a swizzle atom");
};

struct Barriers {
  uint64_t kv;              // K and V of the block, once
  uint64_t step[kBuffers];  // Q_i and dO_i of each buffer
};
static_assert(sizeof(Barriers) <= fa3_backward::kBarrierBytes);

// The SRAM of one block, in fa3_backward::sram_bytes' order. Every tile is D / 64 slabs of
// (rows, 64), one after the other, in TMA's 128-byte swizzle.
template <class T, int D>
struct Sram {
  Barriers* bars;
  T* sK;        // (Bc, D)
  T* sV;        // (Bc, D)
  T* sQ;        // (kBuffers, Br, D)
  T* sdO;       // (kBuffers, Br, D)
  T* sdS;       // (Bc, Br): dS^T of the step, keys as rows
  float* sL;    // (kBuffers, Br)
  float* sD;    // (kBuffers, Br)
  float* sdQx;  // (kWarpgroups, Br, D / kWarpgroups) at d = 64: dQ's exchange; none at 128
  __device__ __forceinline__ explicit Sram(unsigned char* raw) {
    using Tl = Tiles<T, D>;
    const uint32_t pad =
        (fa3::kSwizzleAtom - ptx::sram_address(raw) % fa3::kSwizzleAtom) % fa3::kSwizzleAtom;
    unsigned char* base = raw + pad;
    bars = reinterpret_cast<Barriers*>(base);
    sK = reinterpret_cast<T*>(base + fa3_backward::kBarrierBytes);
    sV = sK + Tl::kKVElems;
    sQ = sV + Tl::kKVElems;
    sdO = sQ + kBuffers * Tl::kQElems;
    sdS = sdO + kBuffers * Tl::kQElems;
    sL = reinterpret_cast<float*>(sdS + Tl::kdSElems);
    sD = sL + kBuffers * kBr;
    sdQx = sD + kBuffers * kBr;
  }
};

struct TensorMaps {
  hopper::TensorMap q, k, v, dout;
};

// Copies (the issuing warp's elected lane): K and V of the block, once.
template <class T, int D>
__device__ __forceinline__ void load_kv(const TensorMaps& maps, const Sram<T, D>& sram, int b,
                                        int hk, int k0) {
  uint64_t* bar = &sram.bars->kv;
  hopper::mbarrier_arrive_expect_tx(bar, 2 * Tiles<T, D>::kKVBytes);
#pragma unroll
  for (int s = 0; s < Tiles<T, D>::kSlabs; ++s) {
    hopper::tma_load_4d(sram.sK + s * kBc * kSlab, &maps.k.map, bar, s * kSlab, k0,
                        hk * maps.k.head_step, b * maps.k.batch_step);
    hopper::tma_load_4d(sram.sV + s * kBc * kSlab, &maps.v.map, bar, s * kSlab, k0,
                        hk * maps.v.head_step, b * maps.v.batch_step);
  }
}

// Copies (the issuing warp's elected lane): Q_i and dO_i of a step into buffer buf.
template <class T, int D>
__device__ __forceinline__ void load_step_tiles(const TensorMaps& maps, const Sram<T, D>& sram,
                                                int b, Step step, int buf) {
  uint64_t* bar = &sram.bars->step[buf];
  hopper::mbarrier_arrive_expect_tx(bar, 2 * Tiles<T, D>::kQBytes);
  T* sQ_i = sram.sQ + buf * Tiles<T, D>::kQElems;
  T* sdO_i = sram.sdO + buf * Tiles<T, D>::kQElems;
#pragma unroll
  for (int s = 0; s < Tiles<T, D>::kSlabs; ++s) {
    hopper::tma_load_4d(sQ_i + s * kBr * kSlab, &maps.q.map, bar, s * kSlab, step.q0,
                        step.h * maps.q.head_step, b * maps.q.batch_step);
    hopper::tma_load_4d(sdO_i + s * kBr * kSlab, &maps.dout.map, bar, s * kSlab, step.q0,
                        step.h * maps.dout.head_step, b * maps.dout.batch_step);
  }
}

// L_i and D_i (Br) of a step into buffer buf of sL, sD by cp.async: threads [0, Br) copy L,
// threads [Br, 2 Br) copy D, one float each; rows past N_q get 0 (and are masked where used).
template <class T, int D>
__device__ __forceinline__ void load_step_rows(const BackwardProblem& bp, const Sram<T, D>& sram,
                                               int b, Step step, int buf) {
  const Problem& p = bp.fwd;
  if (threadIdx.x >= 2 * kBr) return;
  const int r = threadIdx.x % kBr, row = step.q0 + r;
  const float* gRow =
      (threadIdx.x < kBr ? p.lse : bp.d_rows) + (int64_t(b) * p.heads_q + step.h) * p.n_q;  // (N_q)
  float* sRow = (threadIdx.x < kBr ? sram.sL : sram.sD) + buf * kBr + r;
  ptx::cp_async_4(sRow, row < p.n_q ? gRow + row : gRow, row < p.n_q);
}

// ---- One warpgroup's per-step algebra on its (64 keys, Br) tiles -------------------------
// The thread holds keys g and g + 8 of its warp's 16 (g = lane / 4): element 4 j + e of rS
// is key key_g + 8 (e / 2), query q0 + 8 j + 2 (lane % 4) + e % 2 (wgmma's accumulator).

// Whether the warpgroup's keys [k0w, k0w + 64) against query tile [q0, q0 + Br) need a
// mask: either is ragged, or a key lies in the future of the tile's first row.
__device__ __forceinline__ bool tile_needs_mask(const Problem& p, int q0, int k0w) {
  return k0w + kM > p.n_k || q0 + kBr > p.n_q || (p.causal && k0w + kM - 1 > q0 + p.causal_offset);
}

// S^T entries whose key is past N_k, whose query is past N_q, or whose key is in the
// query's future become -inf, so P^T = 0 there. q_t = q0 + 2 (lane % 4).
__device__ __forceinline__ void mask_scores_t(float (&rS)[kSRegs], int key_g, int q_t,
                                              const Problem& p) {
#pragma unroll
  for (int i = 0; i < kSRegs; ++i) {
    const int key = key_g + 8 * ((i % 4) / 2), row = q_t + 8 * (i / 4) + i % 2;
    if (row >= p.n_q || is_masked(p, row, key)) rS[i] = -INFINITY;
  }
}

// P^T = exp(S^T * scale - L), as 2^(S^T scale log2e - L log2e), rounded to T into rPa, the A
// fragments of dV += P^T dO: k-slice kk (queries 16 kk .. + 15), register q holds elements
// i = 8 kk + 4 (q / 2) + 2 (q % 2) and i + 1 (wgmma.cuh's A layout from two accumulator
// tiles). L is per query, per column: sL_i[c]. A query with L = -inf saw no key at all, so
// every score of it is masked: exponentiate against 0 instead, since -inf - (-inf) is NaN.
template <class T>
__device__ __forceinline__ void probabilities_t(uint32_t (&rPa)[kBr / kK][4],
                                                const float (&rS)[kSRegs], const float* sL_i,
                                                int lane, float scale_log2) {
#pragma unroll
  for (int kk = 0; kk < kBr / kK; ++kk)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = 8 * kk + 4 * (q / 2) + 2 * (q % 2);
      const float2 L = *reinterpret_cast<const float2*>(sL_i + 8 * (i / 4) + (lane % 4) * 2);
      const float base0 = L.x == -INFINITY ? 0.0f : L.x * kLog2e;
      const float base1 = L.y == -INFINITY ? 0.0f : L.y * kLog2e;
      rPa[kk][q] = ptx::pack2<T>(ptx::exp2_approx(fmaf(rS[i], scale_log2, -base0)),
                                 ptx::exp2_approx(fmaf(rS[i + 1], scale_log2, -base1)));
    }
}

// dS^T = P^T o (dP^T - D), P^T as rounded to T (as the mma reads it, and as the CPU's
// low-precision operators store it), D per query: sD_i[c]; rounded to T into rdSa, the A
// fragments of dK += dS^T Q, in rPa's layout.
template <class T>
__device__ __forceinline__ void grad_scores_t(uint32_t (&rdSa)[kBr / kK][4],
                                              const uint32_t (&rPa)[kBr / kK][4],
                                              const float (&rdP)[kSRegs], const float* sD_i,
                                              int lane) {
#pragma unroll
  for (int kk = 0; kk < kBr / kK; ++kk)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = 8 * kk + 4 * (q / 2) + 2 * (q % 2);
      const float2 Dv = *reinterpret_cast<const float2*>(sD_i + 8 * (i / 4) + (lane % 4) * 2);
      const float2 P = ptx::unpack2<T>(rPa[kk][q]);
      rdSa[kk][q] = ptx::pack2<T>(P.x * (rdP[i] - Dv.x), P.y * (rdP[i + 1] - Dv.y));
    }
}

// The thread's dS^T into sdS (Bc, Br), keys as rows, in the 128-byte swizzle: register q of
// k-slice kk is key row r = key_row + 8 (q % 2), queries 16 kk + 8 (q / 2) + 2 (lane % 4),
// + 1, that is chunk 2 kk + q / 2 of the row, stored at chunk (2 kk + q / 2) ^ (r % 8).
// key_row is a multiple of 8 plus g, so r % 8 = g: the 32 lanes hit 32 different banks.
template <class T>
__device__ __forceinline__ void store_ds_t(T* sdS, const uint32_t (&rdSa)[kBr / kK][4], int key_row,
                                           int lane) {
#pragma unroll
  for (int kk = 0; kk < kBr / kK; ++kk)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int r = key_row + 8 * (q % 2), chunk = (2 * kk + q / 2) ^ (r % 8);
      *reinterpret_cast<uint32_t*>(sdS + r * kSlab + chunk * 8 + (lane % 4) * 2) = rdSa[kk][q];
    }
}

// The byte offset of column `col` (a multiple of 16) of a tile of `rows` rows: slab col / 64,
// 2 (col % 64) bytes into its rows.
template <class T>
__device__ __forceinline__ constexpr uint32_t column_bytes(int col, int rows) {
  return uint32_t(((col / kSlab) * rows * kSlab + col % kSlab) * sizeof(T));
}
// The byte offset of row `row` (a multiple of 8) in slab 0 of a tile.
template <class T>
__device__ __forceinline__ constexpr uint32_t row_bytes(int row) {
  return uint32_t(row * kSlab * sizeof(T));
}

// Issues C (64 keys, Br) = A_w B_i^T over d, both K-major in SRAM: S^T = K_w Q_i^T or
// dP^T = V_w dO_i^T. a_desc: row 0 of the warpgroup's keys in sK (sV); b_desc: row 0 of
// the step's buffer of sQ (sdO). Committed as one group.
template <class T, int D>
__device__ __forceinline__ void issue_transposed_scores(float (&rC)[kSRegs], uint64_t a_desc,
                                                        uint64_t b_desc) {
#pragma unroll
  for (int kk = 0; kk < D / kK; ++kk)
    hopper::wgmma_ss<T, kBr>(rC, hopper::descriptor_plus(a_desc, column_bytes<T>(kk * kK, kBc)),
                             hopper::descriptor_plus(b_desc, column_bytes<T>(kk * kK, kBr)),
                             /*scale_d=*/kk > 0);
  hopper::wgmma_commit();
}

// Issues C (64 keys, D) += A (64 keys, Br) B_i (Br, D), A from registers (P^T or dS^T), B
// the step's dO_i or Q_i read transposed (MN-major) from SRAM. Not committed.
template <class T, int D>
__device__ __forceinline__ void issue_key_gradient(float (&rC)[D / 2],
                                                   const uint32_t (&rA)[kBr / kK][4],
                                                   uint64_t b_desc) {
#pragma unroll
  for (int kk = 0; kk < kBr / kK; ++kk)
    hopper::wgmma_rs<T, D>(rC, rA[kk], hopper::descriptor_plus(b_desc, row_bytes<T>(kk * kK)),
                           /*scale_d=*/1);
}

// dQ += dS K by slabs: warpgroup w takes slab w % kDqSlabs of d (64 columns) over the
// kDqKeys keys from (w / kDqSlabs) kDqKeys: d = 128, slab w over all 128 keys; d = 64, the
// one slab over the warpgroup's own 64 keys.
template <int D>
struct DqSplit {
  static constexpr int kDqSlabs = D / kSlab;
  static constexpr int kDqKeys = kBc * kDqSlabs / fa3_backward::kWarpgroups;
  static_assert(fa3_backward::kWarpgroups % kDqSlabs == 0 && kDqKeys % kK == 0);
  // d = 64: fewer slabs than warpgroups, so their partials are exchanged (exchange_dq).
  static constexpr bool kExchanged = fa3_backward::dq_exchanged(D);
  static_assert(kExchanged == (kDqSlabs < fa3_backward::kWarpgroups));
  // The columns of dQ_i a warpgroup adds (the loops after exchange_dq), as kernel_info.hpp
  // states them for the mirror: half a slab after the exchange, a slab without.
  static_assert(fa3_backward::dq_columns_added(D) == (kExchanged ? kSlab / 2 : kSlab));
  __device__ __forceinline__ static int slab(int wg) { return wg % kDqSlabs; }
  __device__ __forceinline__ static int first_key(int wg) { return (wg / kDqSlabs) * kDqKeys; }
};

// Issues dQ_i[:, slab] (+)= dS (Br, keys) K (keys, 64) over the warpgroup's kDqKeys keys:
// dS^T from sdS and K from sK, both read transposed (MN-major), their descriptors at the
// first key (and K's at the slab). Committed as one group.
template <class T, int D>
__device__ __forceinline__ void issue_dq(float (&rdQ)[kSlab / 2], uint64_t ds_desc,
                                         uint64_t k_desc) {
#pragma unroll
  for (int kk = 0; kk < DqSplit<D>::kDqKeys / kK; ++kk)
    hopper::wgmma_ss_mn<T, kSlab>(rdQ, hopper::descriptor_plus(ds_desc, row_bytes<T>(kk * kK)),
                                  hopper::descriptor_plus(k_desc, row_bytes<T>(kk * kK)),
                                  /*scale_d=*/kk > 0);
  hopper::wgmma_commit();
}

// d = 64: the two warpgroups' dQ_i partials (Br, 64) meet in SRAM. Warpgroup w keeps
// columns [32 w, 32 w + 32) (registers [16 w, 16 w + 16): element 4 j + e is column 8 j +
// 2 (lane % 4) + e % 2) and writes the other half to its slot of sdQx, as float4s in
// fragment order (thread t of either warpgroup holds the same rows and columns); after the
// barrier it adds the other warpgroup's slot into rKeep. sdQx is rewritten only after the
// next step's first barrier, so its reads here are done by then.
constexpr int kDqHalf = kSlab / 4;  // registers of half of a (Br, 64) accumulator
__device__ __forceinline__ void exchange_dq(float (&rKeep)[kDqHalf], const float (&rdQ)[kSlab / 2],
                                            float* sdQx, int wg) {
  static_assert(fa3_backward::kWarpgroups == 2, "the exchange pairs the two warpgroups");
  const int t = threadIdx.x % kWarpgroupThreads;
  float4* mine = reinterpret_cast<float4*>(sdQx) + wg * (kDqHalf / 4) * kWarpgroupThreads;
  const float4* theirs =
      reinterpret_cast<const float4*>(sdQx) + (1 - wg) * (kDqHalf / 4) * kWarpgroupThreads;
  // Selects, not an index by wg: the accumulators stay in registers.
  float give[kDqHalf];
#pragma unroll
  for (int i = 0; i < kDqHalf; ++i) {
    rKeep[i] = wg == 0 ? rdQ[i] : rdQ[kDqHalf + i];
    give[i] = wg == 0 ? rdQ[kDqHalf + i] : rdQ[i];
  }
#pragma unroll
  for (int k = 0; k < kDqHalf / 4; ++k)
    mine[k * kWarpgroupThreads + t] =
        make_float4(give[4 * k], give[4 * k + 1], give[4 * k + 2], give[4 * k + 3]);
  __syncthreads();  // both warpgroups' halves are in sdQx
#pragma unroll
  for (int k = 0; k < kDqHalf / 4; ++k) {
    const float4 v = theirs[k * kWarpgroupThreads + t];
    rKeep[4 * k] += v.x;
    rKeep[4 * k + 1] += v.y;
    rKeep[4 * k + 2] += v.z;
    rKeep[4 * k + 3] += v.w;
  }
}

// dK = scale * sum dS^T Q and dV = sum P^T dO of the thread's keys, rounded to T: element
// 4 j + e is key key_g + 8 (e / 2), column 8 j + 2 (lane % 4) + e % 2.
template <class T, int D>
__device__ __forceinline__ void write_dk_dv(const BackwardProblem& bp, const float (&rdK)[D / 2],
                                            const float (&rdV)[D / 2], int b, int hk, int key_g,
                                            int lane) {
  const Problem& p = bp.fwd;
  T* gdK = static_cast<T*>(bp.dk) + b * bp.dk_stride.batch + hk * bp.dk_stride.head;
  T* gdV = static_cast<T*>(bp.dv) + b * bp.dv_stride.batch + hk * bp.dv_stride.head;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key_g + r * 8;
    if (key >= p.n_k) continue;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int col = j * 8 + (lane % 4) * 2, i = 4 * j + 2 * r;
      *reinterpret_cast<uint32_t*>(gdK + key * bp.dk_stride.row + col) =
          ptx::pack2<T>(rdK[i] * p.scale, rdK[i + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(gdV + key * bp.dv_stride.row + col) =
          ptx::pack2<T>(rdV[i], rdV[i + 1]);
    }
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads, fa3_backward::kBlocksPerSm)
    fa3_backward_kernel(const __grid_constant__ BackwardProblem bp,
                        const __grid_constant__ TensorMaps maps) {
  FLASHLAB_BLOCK_LOG_BEGIN;  // block_log.cuh: nothing unless a bench program asks for the log
  extern __shared__ __align__(128) unsigned char raw_sram[];
  const Sram<T, D> sram(raw_sram);
  const Problem& p = bp.fwd;
  // Read through a shuffle from lane 0, the warpgroup and warp are visibly the same in every
  // lane: ptxas then keeps the wgmma asynchronous across the branches on them.
  const int wg = __shfl_sync(kFullWarp, int(threadIdx.x) / kWarpgroupThreads, 0);
  const bool issuer = __shfl_sync(kFullWarp, int(threadIdx.x) / kWarpSize, 0) == 0;
  const int warp = (threadIdx.x % kWarpgroupThreads) / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int k0 = blockIdx.x * kBc, hk = blockIdx.y, b = blockIdx.z;
  const int k0w = k0 + wg * kM;                        // the warpgroup's first key
  const int key_row = wg * kM + warp * 16 + lane / 4;  // fragment row g, in the block's keys
  const int key_g = k0 + key_row;
  const QueryTiles tiles_i = backward_steps::query_tiles<kBr>(p, k0);
  const int steps = p.group_size * tiles_i.count;  // (query head, query tile) pairs

  if (threadIdx.x == 0) {
    hopper::mbarrier_init(&sram.bars->kv, 1);
    for (int i = 0; i < kBuffers; ++i) hopper::mbarrier_init(&sram.bars->step[i], 1);
    hopper::fence_barrier_init();
  }
  __syncthreads();

  // Keys no query sees (steps = 0) get dK = dV = 0 and load nothing: a block must not exit
  // with copies still landing in its SRAM.
  if (steps > 0) {
    const Step first = backward_steps::step_of<kBr>(tiles_i, hk, p.group_size, 0);
    if (issuer) {
      if (hopper::elect_one_lane()) {
        load_kv<T, D>(maps, sram, b, hk, k0);
        load_step_tiles<T, D>(maps, sram, b, first, 0);
      }
      __syncwarp();
    }
    load_step_rows<T, D>(bp, sram, b, first, 0);
  }
  ptx::cp_async_commit();

  // The operands' descriptors: the warpgroup's keys of sK and sV (K-major, for S^T and
  // dP^T); buffer 0 of sQ and sdO, K-major (S^T, dP^T) and MN-major (dK, dV), which buffer
  // 1 is one tile further on from; sdS^T and sK at the warpgroup's keys and slab of d,
  // MN-major (dQ).
  const uint64_t k_desc = hopper::descriptor_k_major(sram.sK + wg * kM * kSlab);
  const uint64_t v_desc = hopper::descriptor_k_major(sram.sV + wg * kM * kSlab);
  const uint64_t q_desc = hopper::descriptor_k_major(sram.sQ);
  const uint64_t do_desc = hopper::descriptor_k_major(sram.sdO);
  const uint64_t q_mn_desc = hopper::descriptor_mn_major(sram.sQ, kBr);
  const uint64_t do_mn_desc = hopper::descriptor_mn_major(sram.sdO, kBr);
  const int dq_key = DqSplit<D>::first_key(wg), dq_col = DqSplit<D>::slab(wg) * kSlab;
  const uint64_t ds_desc = hopper::descriptor_mn_major(sram.sdS + dq_key * kSlab, kBc);
  const uint64_t k_dq_desc =
      hopper::descriptor_mn_major(sram.sK + dq_key * kSlab + dq_col * kBc, kBc);

  float rdK[D / 2], rdV[D / 2];  // (64 keys, D) each, for the whole loop
#pragma unroll
  for (int i = 0; i < D / 2; ++i) rdK[i] = rdV[i] = 0.0f;
  const float scale_log2 = p.scale * kLog2e;

  for (int s = 0; s < steps; ++s) {
    FLASHLAB_BLOCK_LOG_STEP(s);  // block_log.cuh: nothing unless a bench program asks
    const int buf = s % kBuffers;
    const Step step = backward_steps::step_of<kBr>(tiles_i, hk, p.group_size, s);
    // One barrier: step s's L_i and D_i have landed for every thread, and every warpgroup
    // is done with step s - 1 (its wgmma completed): its buffer, which the prefetch below
    // refills, and sdS.
    ptx::cp_async_wait<0>();
    __syncthreads();
    if (s + 1 < steps) {
      const Step next = backward_steps::step_of<kBr>(tiles_i, hk, p.group_size, s + 1);
      if (issuer) {
        if (hopper::elect_one_lane()) load_step_tiles<T, D>(maps, sram, b, next, 1 - buf);
        __syncwarp();
      }
      load_step_rows<T, D>(bp, sram, b, next, 1 - buf);
      ptx::cp_async_commit();
    }
    if (s == 0) hopper::mbarrier_wait(&sram.bars->kv, 0);
    hopper::mbarrier_wait(&sram.bars->step[buf], uint32_t(s / kBuffers) & 1u);
    const uint32_t buf_bytes = buf * Tiles<T, D>::kQBytes;
    const float* sL_i = sram.sL + buf * kBr;
    const float* sD_i = sram.sD + buf * kBr;

    // S^T and dP^T, one commit group each.
    float rS[kSRegs], rdP[kSRegs];  // (64 keys, Br)
    hopper::wgmma_fence();
    issue_transposed_scores<T, D>(rS, k_desc, hopper::descriptor_plus(q_desc, buf_bytes));
    issue_transposed_scores<T, D>(rdP, v_desc, hopper::descriptor_plus(do_desc, buf_bytes));
    hopper::wgmma_wait<1>();  // S^T has landed; dP^T may still run
    hopper::fence_registers(rS);
    if (tile_needs_mask(p, step.q0, k0w)) mask_scores_t(rS, key_g, step.q0 + 2 * (lane % 4), p);
    uint32_t rPa[kBr / kK][4];  // P^T in T, the A operand of dV += P^T dO
    probabilities_t<T>(rPa, rS, sL_i, lane, scale_log2);
    hopper::wgmma_wait<0>();
    hopper::fence_registers(rdP);
    uint32_t rdSa[kBr / kK][4];  // dS^T in T, the A operand of dK += dS^T Q
    grad_scores_t<T>(rdSa, rPa, rdP, sD_i, lane);

    // dV += P^T dO_i and dK += dS^T Q_i (scale: at the end), one group; dS^T to SRAM
    // meanwhile, for dQ.
    hopper::wgmma_fence();
    issue_key_gradient<T, D>(rdV, rPa, hopper::descriptor_plus(do_mn_desc, buf_bytes));
    issue_key_gradient<T, D>(rdK, rdSa, hopper::descriptor_plus(q_mn_desc, buf_bytes));
    hopper::wgmma_commit();
    store_ds_t<T>(sram.sdS, rdSa, key_row, lane);
    hopper::fence_proxy_async_shared();  // dS^T for wgmma, which reads SRAM through the async proxy
    __syncthreads();  // both warpgroups' keys of dS^T are in sdS

    // dQ_i[:, slab] += dS K over the warpgroup's keys (scale: in the conversion), into the
    // fp32 accumulator.
    float rdQ[kSlab / 2];  // (Br, 64)
    hopper::wgmma_fence();
    issue_dq<T, D>(rdQ, ds_desc, k_dq_desc);
    hopper::wgmma_wait<0>();
    hopper::fence_registers(rdQ);
    hopper::fence_registers(rdK);
    hopper::fence_registers(rdV);
#pragma unroll
    for (int kk = 0; kk < kBr / kK; ++kk) {  // read by the products just waited for
      hopper::fence_registers(rPa[kk]);
      hopper::fence_registers(rdSa[kk]);
    }
    float* gdQacc = bp.dq_accum + (int64_t(b) * p.heads_q + step.h) * p.n_q * D;
    const int row = step.q0 + warp * 16 + lane / 4;
    if constexpr (DqSplit<D>::kExchanged) {
      float rKeep[kDqHalf];  // (Br, 32): columns [32 wg, 32 wg + 32), both warpgroups' sum
      exchange_dq(rKeep, rdQ, sram.sdQx, wg);
#pragma unroll
      for (int j = 0; j < kDqHalf / 4; ++j)
        backward_steps::add_dq_tile<D>(gdQacc, rKeep[4 * j], rKeep[4 * j + 1], rKeep[4 * j + 2],
                                       rKeep[4 * j + 3], row, wg * (kSlab / 2) + 8 * j, p.n_q,
                                       lane);
    } else {
#pragma unroll
      for (int j = 0; j < kSlab / 8; ++j)
        backward_steps::add_dq_tile<D>(gdQacc, rdQ[4 * j], rdQ[4 * j + 1], rdQ[4 * j + 2],
                                       rdQ[4 * j + 3], row, dq_col + 8 * j, p.n_q, lane);
    }
  }
  write_dk_dv<T, D>(bp, rdK, rdV, b, hk, key_g, lane);
  FLASHLAB_BLOCK_LOG_END;
}

template <class T, int D>
void launch(const BackwardProblem& bp, cudaStream_t stream) {
  constexpr flashlab_dtype dtype = kDtypeOf<T>;
  constexpr KernelConfig config = fa3_backward::config(D, dtype);
  static_assert(config.Br == kBr && config.Bc == kBc && config.threads == kThreads);
  using Tl = Tiles<T, D>;
  static_assert(
      fa3::kSwizzleAtom + fa3_backward::kBarrierBytes +
              sizeof(T) * (2 * Tl::kKVElems + 2 * kBuffers * Tl::kQElems + Tl::kdSElems) +
              sizeof(float) * (2 * kBuffers * kBr + fa3_backward::dq_exchange_floats(D)) ==
          config.sram_bytes,
      "the kernel carves up the SRAM that kernel_info.hpp says it takes");
  const auto kernel = fa3_backward_kernel<T, D>;
  throw_if_cuda_error(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(config.sram_bytes)),
                      "fa3 backward kernel shared memory");
  const Problem& p = bp.fwd;
  TensorMaps maps;
  maps.q = hopper::make_tensor_map("Q", p.q, p.q_stride, p.batch, p.heads_q, p.n_q, D, dtype, kBr);
  maps.dout = hopper::make_tensor_map("dO", bp.dout, bp.dout_stride, p.batch, p.heads_q, p.n_q, D,
                                      dtype, kBr);
  maps.k = hopper::make_tensor_map("K", p.k, p.k_stride, p.batch, p.heads_kv, p.n_k, D, dtype, kBc);
  maps.v = hopper::make_tensor_map("V", p.v, p.v_stride, p.batch, p.heads_kv, p.n_k, D, dtype, kBc);
  const dim3 grid((p.n_k + kBc - 1) / kBc, p.heads_kv, p.batch);
  kernel<<<grid, kThreads, config.sram_bytes, stream>>>(bp, maps);
  check_launch("fa3_backward_kernel");
}

}  // namespace

// Each (element type, head dimension of fa2_backward::kHeadDims) is a kernel of its own.
void launch_fa3_backward(const BackwardProblem& problem, cudaStream_t stream) {
  static_assert(compiled_for_64_and_128(fa2_backward::kHeadDims),
                "a head dimension in the table needs its instantiation here");
  dispatch_half_dtype(problem.fwd.dtype, [&](auto t) {
    dispatch_head_dim(problem.fwd.d,
                      [&](auto d) { launch<decltype(t), decltype(d)::value>(problem, stream); });
  });
}

}  // namespace flashlab::gpu

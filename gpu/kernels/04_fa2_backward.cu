// 04_fa2_backward: FlashAttention-2's backward pass on tensor cores, the main kernel.
// The backward does not store P (N_q x N_k): it recomputes it, tile by tile, from the
// forward's log-sum-exp L, which the forward already wrote:
//   S = Q K^T * scale,  P = exp(S - L),  dV = P^T dO,  dP = dO V^T,
//   dS = P o (dP - D) with D = rowsum(dO o O) (04_backward_preprocess.cu),
//   dQ = dS K * scale,  dK = dS^T Q * scale.
// The order (FlashAttention-2's): a block of 8 warps owns one KV tile, Bc = 128 keys of one
// (batch, KV head), and loops over the query heads of its GQA group and over their query tiles of
// Br = 64 rows. dK and dV of its keys stay in registers for the whole loop (summed over the
// group's query heads on chip, no atomics), and are written once at the end. dQ of a query
// tile gets a share from every KV tile, that is from many blocks: each adds its share into
// an fp32 accumulator in HBM with atomic reductions (the order of those sums varies from run
// to run; the deterministic mode computes dQ with 04_fa2_backward_dq.cu instead).
// Warps split over keys: warp w owns keys [16w, 16w + 16) of the block's Bc, so its P^T,
// dP^T and dS^T are (16, Br) m16 tiles whose rows are its keys: exactly the A operand of
// dV += P^T dO and dK += dS^T Q, straight from the C fragments (as the forward feeds W to
// W V). For dQ = dS K the block's dS^T goes through SRAM (sdS), where warp w reads back
// rows [16r, 16r + 16) of dS, r = w % 4, transposed by ldmatrix.trans, for its half w / 4 of
// d (4 row tiles x 2 halves: the 8 warps share the product evenly).
// Per step (one query tile of one query head), per block:
//   loads: Q_i, dO_i (Br, d) by cp.async, double-buffered behind the previous step; L_i, D_i
//   five products of 2 Br Bc d FLOPs each: S^T, dP^T, dV, dK, dQ (10 Br Bc d in all, 2.5x
//   the forward's 4 Br Bc d);
//   dQ: Br d fp32 sums into the accumulator, as Br d / 4 16-byte reductions
//   (red.global.add.v4.f32: one per lane per n8 tile of dQ, add_dq_tile), Br d / 128 warp
//   instructions, each covering 16 full 32-byte L2 sectors.
// Dropout (p > 0, a separate instantiation; p = 0 runs the kernel without it): the keep mask
// Z = M / (1 - p) of (batch, query head, query, key), the CPU reference's Philox rule, is
// drawn again on the transposed fragments of P^T (dropout_keep_m16n8_t: 8 Philox calls per
// lane per step) and applied twice: dV += (P o Z)^T dO (as P o M, the factor 1/(1 - p) on dV
// at the end) and dS = P o (dP o Z - D). D = rowsum(dO o O) needs no change: O was computed
// with the same Z.
// Whole problem, non-causal: FLOPs = 10 B Hq N_q N_k d. HBM/L2 reads: K, V once (4 B Hkv N_k d
// bytes in bf16/fp16) plus Q, dO, L, D once per KV tile: B Hq N_q (4 d + 8) ceil(N_k / Bc)
// bytes; writes: dK, dV (4 B Hkv N_k d bytes) and the dQ atomics, B Hq N_q d ceil(N_k / Bc)
// fp32 read-modify-writes, served by the L2 (B Hq N_q d ceil(N_k / Bc) / 4 vector
// reductions). Against Bc = 64: half the Q, dO loads and half the dQ reductions per FLOP.
// Causal: KV tile j starts at the first query tile that sees its first key (whole-tile
// skipping); tiles across the diagonal are masked.
// Tiles, threads, SRAM, blocks per SM: fa2_backward:: in flashlab/gpu/kernel_info.hpp.
// What is slow and why: every warp reads all of Q_i and dO_i from SRAM twice (as B of S^T and
// dP^T, then transposed as B of dK and dV) while an m16 slice feeds each fragment to one mma
// only; the fp32 reductions of dQ cost L2 bandwidth.
// The forward's trick (two m16 tiles per warp) does not fit here: dK and dV of 32 keys would
// need 256 fp32 registers at d = 128.
// Registers (ptxas, sm_90a): 255 at d = 128 with and without dropout, no spill, so 1 block
// of 8 warps per SM; with dropout the mask's 32-bit word waits in SRAM (sKeep) between its
// draw at the top of the step and its use, and the draw is not unrolled: either way ptxas
// spilled at d = 128.
#include "backward_steps.cuh"
#include "common.cuh"
#include "dropout.cuh"
#include "launch_backward.hpp"
#include "sram_tiles.cuh"

namespace flashlab::gpu {
namespace {

using fa2_backward::kBc;
using fa2_backward::kBlocksPerSm;
using fa2_backward::kBr;
using fa2_backward::kBuffers;
using fa2_backward::kThreads;
using tiles::kMmaM;
using tiles::swizzled;

constexpr int kWarps = kThreads / kWarpSize;
static_assert(kWarps * kMmaM == kBc, "each warp owns one m16 tile of the block's Bc keys");
static_assert(kThreads >= 2 * kBr, "threads [0, Br) copy L_i, threads [Br, 2 Br) copy D_i");
// dQ += dS K of a step: the warps split dQ_i (Br, D) as Br / 16 m16 row tiles x kDqParts
// parts of d.
constexpr int kDqRowTiles = kBr / kMmaM;
constexpr int kDqParts = kWarps / kDqRowTiles;
static_assert(kWarps % kDqRowTiles == 0, "every warp takes one row tile and one part of d");

// SRAM, in elements of T: sK, sV (Bc, D); sQ, sdO (kBuffers, Br, D); sdS (Bc, Br);
// then sL, sD (kBuffers, Br) fp32; then sKeep (kThreads) 32-bit words (dropout).
template <int D>
constexpr int kSKElems = kBc* D;
template <int D>
constexpr int kSQElems = kBuffers* kBr* D;
constexpr int kSdSElems = kBc * kBr;
constexpr int kRowVecs = kBuffers * kBr;  // floats in each of sL and sD

using backward_steps::QueryTiles;
using backward_steps::Step;

// Starts copying step's Q_i, dO_i (Br, D) into buffer buf of sQ, sdO, and its L_i, D_i
// (Br) into sL, sD: threads [0, Br) copy L, threads [Br, 2 Br) copy D, one float each.
// Rows past N_q are zero-filled (and masked where used).
template <class T, int D>
__device__ __forceinline__ void load_step(const BackwardProblem& bp, int b, Step step, int buf,
                                          T* sQ, T* sdO, float* sL, float* sD) {
  const Problem& p = bp.fwd;
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + step.h * p.q_stride.head;
  const T* gdO =
      static_cast<const T*>(bp.dout) + b * bp.dout_stride.batch + step.h * bp.dout_stride.head;
  tiles::load_tile<T, D, kBr, kThreads>(sQ + buf * kBr * D, gQ, p.q_stride.row, step.q0, p.n_q);
  tiles::load_tile<T, D, kBr, kThreads>(sdO + buf * kBr * D, gdO, bp.dout_stride.row, step.q0,
                                        p.n_q);
  if (threadIdx.x >= 2 * kBr) return;
  const int r = threadIdx.x % kBr, row = step.q0 + r;
  const float* gRow =
      (threadIdx.x < kBr ? p.lse : bp.d_rows) + (int64_t(b) * p.heads_q + step.h) * p.n_q;  // (N_q)
  float* sRow = (threadIdx.x < kBr ? sL : sD) + buf * kBr + r;
  ptx::cp_async_4(sRow, row < p.n_q ? gRow + row : gRow, row < p.n_q);
}

// Whether query tile [q0, q0 + Br) against KV tile [k0, k0 + Bc) needs a mask: either is
// ragged, or a key lies in the future of the tile's first row.
__device__ __forceinline__ bool tile_needs_mask(const Problem& p, int q0, int k0) {
  return k0 + kBc > p.n_k || q0 + kBr > p.n_q || (p.causal && k0 + kBc - 1 > q0 + p.causal_offset);
}

// S^T (16 keys, Br queries): entries whose key is past N_k, whose query is past N_q, or
// whose key is in the query's future become -inf, so P^T = 0 there. key_g is the key of
// fragment row g; elements 2, 3 belong to key g + 8; columns are queries q0 + 8 nt + 2t (+1).
__device__ __forceinline__ void mask_scores_t(float (&rS)[kBr / 8][4], int key_g, int q0, int lane,
                                              const Problem& p) {
#pragma unroll
  for (int nt = 0; nt < kBr / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key_g + (e / 2) * 8;
      const int row = q0 + nt * 8 + (lane % 4) * 2 + (e % 2);
      if (row >= p.n_q || is_masked(p, row, key)) rS[nt][e] = -INFINITY;
    }
}

// P^T = exp(S^T * scale - L) in place, as 2^(S^T scale log2e - L log2e). L is per query,
// that is per column here: sL_i[c]. A row with L = -inf saw no key at all, so every score
// of it is masked: exponentiate against 0 instead, since -inf - (-inf) is NaN.
// With dropout, P^T stays undropped here (dS needs P itself); the keep mask Z of these
// fragments is drawn right after (keep_mask_t) and applied to P^T for dV and to dP^T.
__device__ __forceinline__ void probabilities_t(float (&rS)[kBr / 8][4], const float* sL_i,
                                                int lane, float scale_log2) {
#pragma unroll
  for (int nt = 0; nt < kBr / 8; ++nt) {
    const float2 L = *reinterpret_cast<const float2*>(sL_i + nt * 8 + (lane % 4) * 2);
    const float base[2] = {L.x == -INFINITY ? 0.0f : L.x * kLog2e,
                           L.y == -INFINITY ? 0.0f : L.y * kLog2e};
#pragma unroll
    for (int e = 0; e < 4; ++e)
      rS[nt][e] = ptx::exp2_approx(fmaf(rS[nt][e], scale_log2, -base[e % 2]));
  }
}

// Dropout's keep mask Z of the warp's S^T (16 keys from key0, Br queries from q0) under the
// CPU reference's Philox rule, indexed by (batch, query head h, query, key): 4 bits per
// n-tile (bit e: element e kept), n-tile nt at bits [4 nt, 4 nt + 4): 32 bits in all.
static_assert(kBr / 8 * 4 <= 32, "the keep bits of a warp's S^T fit one 32-bit register");
__device__ __forceinline__ uint32_t keep_mask_t(const DropoutRule& rule, uint32_t head_word,
                                                int key0, int q0, int lane) {
  uint32_t bits = 0;
#pragma unroll 1  // one n-tile's Philox temporaries at a time (unrolled, ptxas spills)
  for (int nt = 0; nt < kBr / 8; ++nt)
    bits |= dropout_keep_m16n8_t(rule, head_word, key0, q0 + nt * 8, lane) << (4 * nt);
  return bits;
}

// dV += (P o M)^T dO_i, M the 0/1 keep mask: each k-slice of P^T, packed in T (rPa), keeps
// its kept halves and zeroes the dropped ones by a bitwise AND (no unpacking, no registers
// for floats), then goes to the tensor cores as in tiles::mma_a_b. The factor 1/(1 - p) of
// Z = M / (1 - p) is applied once, to dV at the end (write_dk_dv): the same sum, rounded
// once less than the CPU's stored P o Z.
template <class T, int D>
__device__ __forceinline__ void mma_dropped_p_b(float (&rdV)[D / 8][4],
                                                const uint32_t (&rPa)[kBr / 16][4],
                                                uint32_t keep_bits, const T* sdO_i, int lane) {
#pragma unroll
  for (int kk = 0; kk < kBr / 16; ++kk) {
    uint32_t rA[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // j: n-tile 2 kk + j / 2, elements 2 (j % 2), + 1
      const unsigned keep = keep_bits >> (4 * (2 * kk + j / 2) + 2 * (j % 2));
      rA[j] = rPa[kk][j] & ((keep & 1u ? 0x0000ffffu : 0u) | (keep & 2u ? 0xffff0000u : 0u));
    }
    tiles::mma_slice_b<T, D>(rdV, rA, sdO_i, kk, lane);
  }
}

// dP^T o Z in place (dropout: the gradient reaches only the kept weights, scaled by
// 1/(1 - p)), before dS.
__device__ __forceinline__ void drop_grad_t(float (&rdP)[kBr / 8][4], uint32_t keep_bits,
                                            float keep_scale) {
#pragma unroll
  for (int nt = 0; nt < kBr / 8; ++nt) apply_dropout(rdP[nt], keep_bits >> (4 * nt), keep_scale);
}

// dS^T = P^T o (dP^T - D), written over dP^T; P^T comes packed in T (as the mma reads it,
// and as the CPU's low-precision operators store it); D is per query, per column: sD_i[c].
template <class T>
__device__ __forceinline__ void grad_scores_t(float (&rdP)[kBr / 8][4],
                                              const uint32_t (&rPa)[kBr / 16][4], const float* sD_i,
                                              int lane) {
#pragma unroll
  for (int nt = 0; nt < kBr / 8; ++nt) {
    const float2 Dv = *reinterpret_cast<const float2*>(sD_i + nt * 8 + (lane % 4) * 2);
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // rows g and g + 8 of the fragment
      const float2 P = tiles::c_from_a<T, kBr>(rPa, nt, r);
      rdP[nt][2 * r] = P.x * (rdP[nt][2 * r] - Dv.x);
      rdP[nt][2 * r + 1] = P.y * (rdP[nt][2 * r + 1] - Dv.y);
    }
  }
}

// The warp's dS^T (16 keys, Br) into sdS (Bc, Br), rounded to T: fragment (g, 2t..2t+1) of
// n-tile nt is keys 16w + g (and + 8), queries 8 nt + 2t, + 1: one 32-bit store each.
template <class T>
__device__ __forceinline__ void store_ds_t(T* sdS, const float (&rdS)[kBr / 8][4], int warp,
                                           int lane) {
  const int key = warp * kMmaM + lane / 4, col = (lane % 4) * 2;
#pragma unroll
  for (int nt = 0; nt < kBr / 8; ++nt) {
    *reinterpret_cast<uint32_t*>(sdS + swizzled<kBr>(key, nt) + col) =
        ptx::pack2<T>(rdS[nt][0], rdS[nt][1]);
    *reinterpret_cast<uint32_t*>(sdS + swizzled<kBr>(key + 8, nt) + col) =
        ptx::pack2<T>(rdS[nt][2], rdS[nt][3]);
  }
}

// dQ_i += dS K_j for the warp's share of dQ_i: query rows [q0 + 16 r, + 16) of row tile
// r = w % (Br / 16), columns [part D / kDqParts, + D / kDqParts) of part w / (Br / 16);
// added into the fp32 accumulator gdQacc (rows of D floats), 16 columns of d at a time so
// that only (16, 16) of dQ is ever held, each n8 tile as one 16-byte reduction per lane
// (add_dq_tile). dS (16, Bc) comes from sdS through ldmatrix.trans; K_j (Bc, D) is (k, n),
// read transposed as V is in the forward.
template <class T, int D>
__device__ __forceinline__ void add_dq(float* gdQacc, const T* sdS, const T* sK, int q0, int n_q,
                                       int warp, int lane) {
  constexpr int kPairs = D / 16 / kDqParts;  // 16-column slices of d per warp
  static_assert((D / 16) % kDqParts == 0, "the parts of d are whole 16-column slices");
  const int row_tile = warp % kDqRowTiles, np0 = (warp / kDqRowTiles) * kPairs;
  uint32_t rdS[kBc / 16][4];  // A fragments of dS, all Bc keys
  tiles::load_a_transposed<T, kBc, kBr>(rdS, sdS, row_tile * kMmaM, lane);
  const int b_row = (lane % 8) + ((lane / 8) % 2) * 8;
  const int row = q0 + row_tile * kMmaM + lane / 4;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int np = np0 + i;
    // Chunk 2 np (lanes 16..31: 2 np + 1) of the K row, swizzled by the row, whose row % 8
    // is lane % 8. Written out rather than LaneChunks::at: np depends on the warp.
    const int col = swizzle::stored_chunk(lane, 2 * np + lane / 16) * tiles::kChunk;
    float rC[2][4] = {};  // dQ (16, 16): n-tiles 2np, 2np + 1
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t rK[4];
      ptx::ldmatrix_x4_trans(rK, sK + (kk * 16 + b_row) * D + col);
      ptx::mma_16816<T>(rC[0], rdS[kk], rK[0], rK[1]);
      ptx::mma_16816<T>(rC[1], rdS[kk], rK[2], rK[3]);
    }
#pragma unroll
    for (int n2 = 0; n2 < 2; ++n2)
      backward_steps::add_dq_tile<D>(gdQacc, rC[n2][0], rC[n2][1], rC[n2][2], rC[n2][3], row,
                                     (2 * np + n2) * 8, n_q, lane);
  }
}

// dK = scale * sum dS^T Q and dV = dv_scale * sum (P o M)^T dO of the warp's 16 keys, rounded
// to T; dv_scale is dropout's 1/(1 - p) (mma_dropped_p_b), 1 without it. They leave through
// SRAM, as the forward's O: the warp writes its fragments into its own 16 rows of sK and sV,
// then copies whole rows out with 16-byte stores, so every sector leaving the SM is full.
// Stored straight from the fragments, each instruction wrote 8 rows x 16 bytes, half of each
// of 8 sectors, which the H200 merged in part after the L1 (docs/IO-LEVELS.md, "The passes
// from a cold L2"). The caller has made every warp's last read of sK and sV (and every copy
// into them) complete for the whole block.
template <class T, int D, bool kDropout>
__device__ __forceinline__ void write_dk_dv(const BackwardProblem& bp, T* sK, T* sV,
                                            const float (&rdK)[D / 8][4],
                                            const float (&rdV)[D / 8][4]) {
  // The block's tile and the lane read afresh from the grid (as fa2's finalize does): taken
  // from the mainloop's values, they kept registers live across the loop, and ptxas spilled at
  // d = 128 in bf16. Dropout's variant there still spills 4 bytes (bench/gpu/NOTES.md).
  const int k0 = blockIdx.x * kBc, hk = blockIdx.y, b = blockIdx.z;
  const int lane = ptx::lane_id(), row0 = (threadIdx.x / kWarpSize) * kMmaM;
  const Problem& p = bp.fwd;
  // Without dropout dV * 1.0f: exact, bit for bit the plain sum.
  const float dv_scale = kDropout ? p.dropout.keep_scale : 1.0f;
  tiles::store_fragments<T, D>(sK, row0, rdK, p.scale, p.scale, lane);
  tiles::store_fragments<T, D>(sV, row0, rdV, dv_scale, dv_scale, lane);
  __syncwarp();
  T* gdK = static_cast<T*>(bp.dk) + b * bp.dk_stride.batch + hk * bp.dk_stride.head;
  T* gdV = static_cast<T*>(bp.dv) + b * bp.dv_stride.batch + hk * bp.dv_stride.head;
  tiles::store_rows<T, D, kMmaM>(gdK, bp.dk_stride.row, k0 + row0, p.n_k, sK, row0, lane);
  tiles::store_rows<T, D, kMmaM>(gdV, bp.dv_stride.row, k0 + row0, p.n_k, sV, row0, lane);
}

template <class T, int D, bool kDropout>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) fa2_backward_kernel(BackwardProblem bp) {
  extern __shared__ __align__(128) unsigned char sram[];
  T* sK = reinterpret_cast<T*>(sram);                     // (Bc, D)
  T* sV = sK + kSKElems<D>;                               // (Bc, D)
  T* sQ = sV + kSKElems<D>;                               // (2, Br, D)
  T* sdO = sQ + kSQElems<D>;                              // (2, Br, D)
  T* sdS = sdO + kSQElems<D>;                             // (Bc, Br): dS^T of the current step
  float* sL = reinterpret_cast<float*>(sdS + kSdSElems);  // (2, Br)
  float* sD = sL + kRowVecs;                              // (2, Br)
  uint32_t* sKeep = reinterpret_cast<uint32_t*>(sD + kRowVecs);  // (threads): dropout's Z

  const Problem& p = bp.fwd;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int k0 = blockIdx.x * kBc, hk = blockIdx.y, b = blockIdx.z;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + hk * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + hk * p.v_stride.head;
  const QueryTiles tiles_i = backward_steps::query_tiles<kBr>(p, k0);
  const int steps = p.group_size * tiles_i.count;  // (query head, query tile) pairs

  tiles::load_tile<T, D, kBc, kThreads>(sK, gK, p.k_stride.row, k0, p.n_k);
  tiles::load_tile<T, D, kBc, kThreads>(sV, gV, p.v_stride.row, k0, p.n_k);
  if (steps > 0)
    load_step<T, D>(bp, b, backward_steps::step_of<kBr>(tiles_i, hk, p.group_size, 0), 0, sQ, sdO,
                    sL, sD);
  ptx::cp_async_commit();

  float rdK[D / 8][4], rdV[D / 8][4];  // (16 keys, D) each, for the whole loop
  tiles::zero<D>(rdK);
  tiles::zero<D>(rdV);
  const float scale_log2 = p.scale * kLog2e;
  const int key_g = k0 + warp * kMmaM + lane / 4;

  for (int s = 0; s < steps; ++s) {
    const int buf = s % kBuffers;
    const Step step = backward_steps::step_of<kBr>(tiles_i, hk, p.group_size, s);
    const int h = step.h, q0 = step.q0;
    // One barrier: step s's tiles have landed for every thread, and every warp is done with
    // step s - 1 (its buffer, which the prefetch below refills, and sdS).
    ptx::cp_async_wait<0>();
    __syncthreads();
    if (s + 1 < steps) {
      load_step<T, D>(bp, b, backward_steps::step_of<kBr>(tiles_i, hk, p.group_size, s + 1),
                      (s + 1) % kBuffers, sQ, sdO, sL, sD);
      ptx::cp_async_commit();
    }
    const T* sQ_i = sQ + buf * kBr * D;
    const T* sdO_i = sdO + buf * kBr * D;

    // Dropout's Z of the warp's P^T (keep_mask_t) depends on no data: it is drawn first,
    // while only dK and dV hold registers, and parked in SRAM, each thread's word in its own
    // slot (no barrier needed), until dV and dP^T use it (read once, volatile, so that the
    // read stays there): at d = 128 no register is free to keep it across the products.
    if constexpr (kDropout)
      sKeep[threadIdx.x] =
          keep_mask_t(p.dropout, dropout_head_word(b, h), k0 + warp * kMmaM, q0, lane);

    float rS[kBr / 8][4];  // S^T (16 keys, Br), then P^T
    tiles::zero<kBr>(rS);
    tiles::mma_a_bt<T, D, kBr>(rS, sK, warp * kMmaM, sQ_i, lane);
    if (tile_needs_mask(p, q0, k0)) mask_scores_t(rS, key_g, q0, lane, p);
    probabilities_t(rS, sL + buf * kBr, lane, scale_log2);
    uint32_t rPa[kBr / 16][4];  // P^T packed in T, as A fragments: half the registers of rS
    tiles::pack_a<T, kBr>(rPa, rS);

    float rdP[kBr / 8][4];  // dP^T (16 keys, Br) = V_j dO_i^T, then dS^T
    tiles::zero<kBr>(rdP);
    tiles::mma_a_bt<T, D, kBr>(rdP, sV, warp * kMmaM, sdO_i, lane);
    if constexpr (kDropout) {
      const uint32_t keep_bits = *static_cast<volatile uint32_t*>(sKeep + threadIdx.x);
      mma_dropped_p_b<T, D>(rdV, rPa, keep_bits, sdO_i, lane);
      drop_grad_t(rdP, keep_bits, p.dropout.keep_scale);  // dP^T o Z
    } else {
      tiles::mma_a_b<T, kBr, D>(rdV, rPa, sdO_i, lane);  // dV += P^T dO_i
    }
    grad_scores_t<T>(rdP, rPa, sD + buf * kBr, lane);
    const auto& rdS = rdP;
    tiles::mma_c_b<T, kBr, D>(rdK, rdS, sQ_i, lane);  // dK += dS^T Q_i (scale: at the end)

    if (bp.dq_accum != nullptr) {  // null in deterministic mode: 04_fa2_backward_dq.cu
      store_ds_t<T>(sdS, rdS, warp, lane);
      __syncthreads();  // every warp's keys of dS^T are in sdS
      float* gdQacc = bp.dq_accum + (int64_t(b) * p.heads_q + h) * p.n_q * D;
      add_dq<T, D>(gdQacc, sdS, sK, q0, p.n_q, warp, lane);
    }
  }
  // With no step the K and V copies may still be in flight; and add_dq reads every row of sK.
  // Both done for the whole block before any warp writes its rows of sK and sV.
  ptx::cp_async_wait<0>();
  __syncthreads();
  write_dk_dv<T, D, kDropout>(bp, sK, sV, rdK, rdV);
}

template <class T, int D, bool kDropout>
void launch(const BackwardProblem& bp, cudaStream_t stream) {
  constexpr KernelConfig config = fa2_backward::config(D, kDtypeOf<T>);
  static_assert(config.Br == kBr && config.Bc == kBc && config.threads == kThreads);
  static_assert(sizeof(T) * (2 * kSKElems<D> + 2 * kSQElems<D> + kSdSElems) +
                        sizeof(float) * 2 * kRowVecs + sizeof(uint32_t) * kThreads ==
                    config.sram_bytes,
                "the kernel carves up the SRAM that kernel_info.hpp says it takes");
  static_assert(sizeof(T) * (2 * kSKElems<D> + 2 * kSQElems<D> + kSdSElems) % 16 == 0,
                "sL starts 16-byte aligned");
  throw_if_cuda_error(
      cudaFuncSetAttribute(fa2_backward_kernel<T, D, kDropout>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(config.sram_bytes)),
      "fa2 backward kernel shared memory");
  const dim3 grid((bp.fwd.n_k + kBc - 1) / kBc, bp.fwd.heads_kv, bp.fwd.batch);
  fa2_backward_kernel<T, D, kDropout><<<grid, config.threads, config.sram_bytes, stream>>>(bp);
  check_launch("fa2_backward_kernel");
}

}  // namespace

// Each (element type, dropout or not, head dimension of fa2_backward::kHeadDims) is a kernel of
// its own: dropout_p = 0 runs the instantiation without any dropout code, bit for bit the
// kernel without dropout.
void launch_fa2_backward(const BackwardProblem& problem, cudaStream_t stream) {
  static_assert(compiled_for_64_and_128(fa2_backward::kHeadDims),
                "a head dimension in the table needs its instantiation here");
  dispatch_half_dtype_dropout_head_dim(
      problem.fwd.dtype, problem.fwd.dropout.enabled, problem.fwd.d,
      [&](auto t, auto d, auto dropout) {
        launch<decltype(t), decltype(d)::value, decltype(dropout)::value>(problem, stream);
      });
}

}  // namespace flashlab::gpu

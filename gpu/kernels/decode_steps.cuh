// What the two split-KV decode kernels share (05_decode_split_kv.cu, a grid of one block per
// split; 05_decode_queue.cu, persistent blocks taking pieces from a queue): a warp's online
// softmax over its 16 keys of a tile on the tensor cores, the copy of one tile's K and V into
// the ring, and the merge of the block's four warp states into one state per query row,
// written to the workspace for 05_decode_combine.cu (or, with one split, the rows ended
// there: O and LSE, merge_warps's ends_rows).
//
// The block's query rows are the N_q rows of every query head that reads its KV head, packed
// row p = (head in group) * N_q + i, up to 16 of them: the M of an mma.sync m16n8k16 tile,
// held as A fragments in registers. Each of the 4 warps takes its own 16 keys of every tile
// of Bc = 64 keys and keeps its own state over them:
//   S (16, 16)  = Q (16, d) K_w^T         d / 16 ldmatrix.x4, d / 8 mma   (fp32 in registers)
//   m', alpha, W = exp2(S s - m' s), l     online softmax per row (quad shuffles)
//   U (16, d) += W (16, 16) V_w (16, d)    d / 16 ldmatrix.x4.trans, d / 8 mma
#pragma once

#include "common.cuh"
#include "decode_problem.hpp"
#include "ptx.cuh"
#include "sram_tiles.cuh"

#include <cstdint>

namespace flashlab::gpu::decode_steps {

using namespace decode;
using tiles::LaneChunks;
using tiles::swizzled;

// kernel_info.hpp's facts for head dimension kD, as constants device code can read.
template <int kD>
struct Shape {
  static constexpr int kChunks = chunks_per_row(kD);          // 16-byte chunks a key
  static constexpr int kKeysPerThread = keys_per_thread(kD);  // 8 or 4, consecutive
  static constexpr int kStages = stages(kD);                  // 3 or 6
  static constexpr int kTileElems = kBc * kD;                 // K or V of one tile
  static constexpr int64_t kRingBytes = ring_bytes(kD);
  static constexpr int64_t kQueueMergeBytes = queue_merge_bytes(kD);
  static_assert(kStages >= 2, "the ring needs a tile to compute and one in flight");
};

// Sets the workspace's error word: `bit`, and (first writer wins) the entry it concerns.
__device__ inline void flag_error(uint32_t* error_word, uint32_t bit, int entry_field, int b,
                                  int page) {
  atomicOr(&error_word[kErrorBits], bit);
  if (atomicCAS(&error_word[entry_field], 0u, uint32_t(b + 1)) == 0u && page >= 0)
    error_word[kErrorPageIndex] = uint32_t(page);
}

// Batch entry b's length as read (`len`), clamped into the cache so that no load leaves it;
// `report`: the one thread of the batch entry that flags a bad one.
__device__ __forceinline__ int clamp_length(const DecodeProblem& p, int b, int len, bool report) {
  if (len < 0 || len > p.capacity) {
    if (report) flag_error(p.error_word, FLASHLAB_DECODE_BAD_LENGTH, kErrorLengthEntry, b, -1);
    len = min(max(len, 0), p.capacity);
  }
  return len;
}

// The keys [k0, k1) of a split or piece of a sequence, in `tiles` tiles of Bc keys.
struct KeyRange {
  int k0 = 0, k1 = 0, tiles = 0;
};
// Tiles [t0, t1) of a sequence of len keys.
__device__ __forceinline__ KeyRange key_range(int len, int t0, int t1) {
  return {min(t0 * kBc, len), min(t1 * kBc, len), t1 - t0};
}

// This warp's (m, l, U) over its keys: rows g and g + 8 of the 16 packed rows (g = lane / 4),
// m in raw score units (W = 2^((S - m) s), s = scale log2 e), l this thread's share of the
// row sum (its quad's four shares add up at the merge), U as mma C fragments. reset() makes
// it the empty state (m = -inf, l = 0, U = 0), before a split's or piece's first tile.
template <int kD>
struct SoftmaxState {
  float m[2];
  float l[2];
  float rU[kD / 8][4];  // (16, d)
  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.0f;
    }
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) rU[dt][e] = 0.0f;
  }
};

// The block's query rows for one (batch entry b, KV head, row block): Q's A fragments (rows
// g and g + 8 of the packed rows, zeros past the group; columns 2 (lane % 4) .. + 1 and + 8
// of every k16 slice), and the first key each of the two rows does not see (bottom-right).
template <int kD>
struct QueryRows {
  uint32_t rQ[kD / 16][4];
  int visible_end[2];  // packed row r sees keys j < len - N_q + i + 1
  int first_row = 0;   // the block's first packed row
  int rows = 0;        // its packed rows, up to kMaxRowsPerBlock
  int mask_from = 0;   // the first key some packed row does not see: tiles that reach it are masked
};
// `load`: false for a split or piece with no keys, which reads no Q.
template <class T, int kD>
__device__ __forceinline__ void load_query_rows(QueryRows<kD>& q, const DecodeProblem& p, int b,
                                                int kv_head, int row_block, int len, bool load,
                                                int lane) {
  q.first_row = row_block * kMaxRowsPerBlock;
  q.rows = min(kMaxRowsPerBlock, p.group_size * p.n_q - q.first_row);
  q.mask_from = len - p.n_q + 1;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int packed = q.first_row + lane / 4 + 8 * r;
    const int h = kv_head * p.group_size + packed / p.n_q, i = packed % p.n_q;
    q.visible_end[r] = len - p.n_q + i + 1;
    const bool has_row = lane / 4 + 8 * r < q.rows && load;
    const T* gQ = static_cast<const T*>(p.q) + int64_t(b) * p.q_stride.batch +
                  int64_t(h) * p.q_stride.head + int64_t(i) * p.q_stride.row + 2 * (lane % 4);
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
      for (int half = 0; half < 2; ++half)  // a0/a1: columns 16 kk + 2t; a2/a3: + 8
        q.rQ[kk][2 * half + r] =
            has_row ? *reinterpret_cast<const uint32_t*>(gQ + 16 * kk + 8 * half) : 0u;
  }
}

// Where thread t's share of a tile's copy goes: chunk `chunk` of keys [first_key, first_key +
// kKeysPerThread) of every tile, K and V (consecutive keys: one page, one block-table entry).
template <int kD>
struct CopyLane {
  int chunk, first_key;
  __device__ __forceinline__ explicit CopyLane(int t)
      : chunk(t % Shape<kD>::kChunks),
        first_key(t / Shape<kD>::kChunks * Shape<kD>::kKeysPerThread) {}
};

// The block-table entry of this thread's keys of tile `tile` of `range` (0 when contiguous,
// past the range's tiles or past its keys).
template <int kD>
__device__ __forceinline__ int table_entry(const DecodeProblem& p, int b, const KeyRange& range,
                                           int tile, const CopyLane<kD>& lane) {
  if (p.block_table == nullptr || tile >= range.tiles) return 0;
  const int j0 = range.k0 + tile * kBc + lane.first_key;
  return j0 < range.k1 ? p.block_table[int64_t(b) * p.block_table_stride + (j0 >> p.page_shift)]
                       : 0;
}

// Starts the copy of tile `tile` of `range` (batch entry b, KV head kv_head) into the ring's
// stage at sKs and sVs; `entry` is table_entry's answer for it. Keys past the range (the
// sequence's ragged end) and a bad page are zero-filled.
template <class T, int kD, bool kEvictFirst>
__device__ __forceinline__ void load_tile(const DecodeProblem& p, int b, int kv_head,
                                          const KeyRange& range, int tile, int entry,
                                          const CopyLane<kD>& lane, T* sKs, T* sVs,
                                          uint64_t l2_policy) {
  const T* gK = static_cast<const T*>(p.k);
  const T* gV = static_cast<const T*>(p.v);
  const int j0 = range.k0 + tile * kBc + lane.first_key;
  int outer = b, row = j0;  // the batch entry (contiguous) or page (paged), the row there
  bool page_ok = true;
  if (p.block_table != nullptr) {
    outer = entry;
    row = j0 & ((1 << p.page_shift) - 1);
    page_ok = entry >= 0 && entry < p.num_pages;
    if (!page_ok && j0 < range.k1)
      flag_error(p.error_word, FLASHLAB_DECODE_BAD_PAGE, kErrorPageEntry, b, entry);
  }
  const int64_t k_at = int64_t(outer) * p.k_stride.batch + int64_t(kv_head) * p.k_stride.head +
                       int64_t(row) * p.k_stride.row + lane.chunk * tiles::kChunk;
  const int64_t v_at = int64_t(outer) * p.v_stride.batch + int64_t(kv_head) * p.v_stride.head +
                       int64_t(row) * p.v_stride.row + lane.chunk * tiles::kChunk;
  // Every key of the thread's run valid (all but the sequence's last tile): one pointer per
  // tensor walked a row at a time, no test a key, so that each copy costs a few instructions
  // rather than the ~18 of the general path below (bench/gpu/NOTES.md, "Decode's copies
  // without a test a key"). Plain loads only: with the evict-first policy this path raised an
  // illegal instruction on the H200 (bf16, d = 64), so hinted copies take the general path.
  if constexpr (!kEvictFirst) {
    if (page_ok && j0 + Shape<kD>::kKeysPerThread <= range.k1) {
      const T* k_src = gK + k_at;
      const T* v_src = gV + v_at;
#pragma unroll
      for (int i = 0; i < Shape<kD>::kKeysPerThread; ++i) {
        const int dst = swizzled<kD>(lane.first_key + i, lane.chunk);
        ptx::cp_async_16(sKs + dst, k_src, true);
        ptx::cp_async_16(sVs + dst, v_src, true);
        k_src += p.k_stride.row;
        v_src += p.v_stride.row;
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < Shape<kD>::kKeysPerThread; ++i) {
    const bool valid = page_ok && j0 + i < range.k1;
    const int dst = swizzled<kD>(lane.first_key + i, lane.chunk);
    const T* k_src = valid ? gK + k_at + i * p.k_stride.row : gK;
    const T* v_src = valid ? gV + v_at + i * p.v_stride.row : gV;
    if constexpr (kEvictFirst) {
      ptx::cp_async_16(sKs + dst, k_src, valid, l2_policy);
      ptx::cp_async_16(sVs + dst, v_src, valid, l2_policy);
    } else {
      ptx::cp_async_16(sKs + dst, k_src, valid);
      ptx::cp_async_16(sVs + dst, v_src, valid);
    }
  }
}

// S (16, 16) = Q K_w^T: Q from its A fragments rQ (16, d), K_w the warp's 16 keys of the
// tile (16, d) in SRAM, as the forward's mma_a_bt does with Q in SRAM.
template <class T, int kD>
__device__ __forceinline__ void compute_scores(float (&rS)[2][4], const uint32_t (&rQ)[kD / 16][4],
                                               const T* sKw, int lane) {
  const int key = (lane % 8) + (lane / 16) * 8;   // lanes 16..31: the second n8 tile
  const LaneChunks chunks(lane, (lane / 8) % 2);  // lanes 8..15, 24..31: the upper 8 of k16
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) rS[nt][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t rK[4];  // B fragments of n-tiles 0 and 1, k-slice kk
    ptx::ldmatrix_x4(rK, sKw + key * kD + chunks.at(kk));
    ptx::mma_16816<T>(rS[0], rQ[kk], rK[0], rK[1]);
    ptx::mma_16816<T>(rS[1], rQ[kk], rK[2], rK[3]);
  }
}

// m' = max(m, rowmax S); alpha = 2^((m - m') s); W = 2^(S s - m' s); l = alpha l + rowsum W;
// U = alpha U + W V_w (flashlab::cpu::update and accumulate, as 03_fa2.cu spells them).
template <class T, int kD>
__device__ __forceinline__ void update(SoftmaxState<kD>& state, float (&rS)[2][4], const T* sVw,
                                       int lane, float scale_log2) {
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float tile_max =
        fmaxf(fmaxf(rS[0][2 * r], rS[0][2 * r + 1]), fmaxf(rS[1][2 * r], rS[1][2 * r + 1]));
    const float m_new = fmaxf(state.m[r], quad_max(tile_max));
    // A row that has seen only masked keys still has m' = -inf: exponentiate against 0
    // instead, since 2^(-inf - (-inf)) is NaN; its W and alpha then come out 0.
    const float base = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
    alpha[r] = ptx::exp2_approx(state.m[r] * scale_log2 - base);
    state.m[r] = m_new;
    float row_sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        rS[nt][e] = ptx::exp2_approx(fmaf(rS[nt][e], scale_log2, -base));  // W
        row_sum += rS[nt][e];
      }
    state.l[r] = alpha[r] * state.l[r] + row_sum;
  }
  // Once the running max has settled, alpha is exactly 1 on most tiles: skip U = alpha U.
  if (__any_sync(kFullWarp, alpha[0] != 1.0f || alpha[1] != 1.0f))
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) state.rU[dt][e] *= alpha[e / 2];
  // W's C fragments are its A fragments (rounded to T): one k16 slice of U += W V_w.
  const uint32_t rW[4] = {ptx::pack2<T>(rS[0][0], rS[0][1]), ptx::pack2<T>(rS[0][2], rS[0][3]),
                          ptx::pack2<T>(rS[1][0], rS[1][1]), ptx::pack2<T>(rS[1][2], rS[1][3])};
  tiles::mma_slice_b<T, kD>(state.rU, rW, sVw, /*kk=*/0, lane);
}

// One tile's step for warp `warp`: S = Q K_w^T, the mask where the tile reaches a row's end,
// then the update, over the stage at sK and sV; key0 is the tile's first key.
template <class T, int kD>
__device__ __forceinline__ void step(SoftmaxState<kD>& state, const QueryRows<kD>& q,
                                     const T* sK, const T* sV, int key0, int warp, int lane,
                                     float scale_log2) {
  const T* sKw = sK + warp * kKeysPerWarp * kD;  // (16, d)
  const T* sVw = sV + warp * kKeysPerWarp * kD;  // (16, d)
  float rS[2][4];  // S, then W: (16 rows, 16 keys)
  compute_scores<T, kD>(rS, q.rQ, sKw, lane);
  if (key0 + kBc > q.mask_from) {  // the sequence's end, or a row's causal window
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + warp * kKeysPerWarp + nt * 8 + 2 * (lane % 4) + e % 2;
        if (key >= q.visible_end[e / 2]) rS[nt][e] = -INFINITY;
      }
  }
  update<T, kD>(state, rS, sVw, lane, scale_log2);
}

// The block's four warp states merged into one state per packed row and written to the
// workspace as split (or piece) `split` of its row: U (d), then m (natural units) and l,
// every state on whole sectors (decode::state_floats). The merge runs over kPassRows packed
// rows at a time in `sram` (U (warps, kPassRows, d), then m and l (warps, kPassRows) each):
// all 16 at once where the ring is idle by then (05_decode_split_kv.cu), 8 at a time in a
// buffer of its own beside a ring still in use (05_decode_queue.cu). Each row's merge is the
// same arithmetic either way, in a fixed order: m = max m_w, then the warps' l and U scaled by
// 2^((m_w - m) s) and added in warp order, so the bits do not depend on the pass. Starts
// with the block's writes to `sram` and ends with a barrier after its last read there (where
// the rows end here, but for the pass's LSE, read after it by its store).
// first_row and rows: the block's packed rows (QueryRows's). Where `ends_rows` (a lone split,
// decode::split_kernel_ends_rows; compiled in only with kMayEndRows, whose caller gives the
// merge kPassRows floats of `sram` more, after l) the merged state is not written: the row
// ends here, O and LSE as the combine would write them from that one state, the pass's LSE in
// one store (consecutive rows of LSE).
template <class T, int kD, int kPassRows, bool kMayEndRows>
__device__ __forceinline__ void merge_warps(const SoftmaxState<kD>& state, float* sram,
                                            const DecodeProblem& p, int b, int kv_head,
                                            int first_row, int rows, int split, bool ends_rows,
                                            int warp, int lane, int t, float scale_log2) {
  static_assert(kPassRows == 8 || kPassRows == 16, "a pass takes row g, or rows g and g + 8");
  const bool end_here = kMayEndRows && ends_rows;  // known false where not compiled in
  float* sU = sram;
  float* sM = sU + kWarps * kPassRows * kD;
  float* sL = sM + kWarps * kPassRows;
  float* sLse = sL + kWarps * kPassRows;  // where ends_rows: the pass's LSE, (kPassRows)
  constexpr int kStride = int(state_floats(kD));
  for (int pass_row0 = 0; pass_row0 < rows; pass_row0 += kPassRows) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = lane / 4 + 8 * r - pass_row0;  // this pass's row
      if (row < 0 || row >= kPassRows) continue;
      float* sU_row = sU + (warp * kPassRows + row) * kD + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt)
        *reinterpret_cast<float2*>(sU_row + dt * 8) =
            make_float2(state.rU[dt][2 * r], state.rU[dt][2 * r + 1]);
      const float l_row = quad_sum(state.l[r]);
      if (lane % 4 == 0) {
        sM[warp * kPassRows + row] = state.m[r];
        sL[warp * kPassRows + row] = l_row;
      }
    }
    __syncthreads();
    const int pass_rows = min(kPassRows, rows - pass_row0);
    for (int idx = t; idx < pass_rows * kD; idx += kThreads) {
      const int r = idx / kD, c = idx % kD;
      float m_max = -INFINITY;
      for (int w = 0; w < kWarps; ++w) m_max = fmaxf(m_max, sM[w * kPassRows + r]);
      float l_sum = 0.0f, u_sum = 0.0f;
      if (m_max != -INFINITY) {
        for (int w = 0; w < kWarps; ++w) {
          const float beta = ptx::exp2_approx((sM[w * kPassRows + r] - m_max) * scale_log2);
          l_sum = fmaf(beta, sL[w * kPassRows + r], l_sum);
          u_sum = fmaf(beta, sU[(w * kPassRows + r) * kD + c], u_sum);
        }
      }
      const int packed = first_row + pass_row0 + r;
      const int h = kv_head * p.group_size + packed / p.n_q, i = packed % p.n_q;
      const float m = m_max == -INFINITY ? -INFINITY : m_max * p.scale;  // natural units
      const int64_t row = (int64_t(b) * p.heads_q + h) * p.n_q + i;      // (b, h, i)
      if (end_here) {  // O lane by lane along the row; LSE to SRAM, stored below
        T* gO = static_cast<T*>(p.o) + int64_t(b) * p.o_stride.batch +
                int64_t(h) * p.o_stride.head + int64_t(i) * p.o_stride.row;
        gO[c] = from_float<T>(u_sum * row_inv_l(l_sum));
        if (c == 0) sLse[r] = row_lse(m, l_sum);
        continue;
      }
      float* state_out = p.states + row * p.splits * kStride + int64_t(split) * kStride;
      state_out[c] = u_sum;
      if (c == 0)  // m and l in one 8-byte store (kStateMlStore), alone in their sector
        *reinterpret_cast<float2*>(state_out + kD) = make_float2(m, l_sum);
    }
    __syncthreads();
    // The pass's rows are consecutive rows (b, h, i) of LSE: one store for all of them.
    if (end_here && p.lse != nullptr) {
      const int64_t first = (int64_t(b) * p.heads_q + int64_t(kv_head) * p.group_size) * p.n_q +
                            first_row + pass_row0;
      store_block_rows<kPassRows>(p.lse, first, first + pass_rows, sLse);
    }
  }
}

}  // namespace flashlab::gpu::decode_steps

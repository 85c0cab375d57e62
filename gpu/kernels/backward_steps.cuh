// What the two main kernels of the backward (04_fa2_backward.cu, v2; 06_fa3_backward.cu, v3)
// share: a block owns a KV tile of one (batch, KV head) and walks the (query head, query
// tile) steps of its GQA group; and dQ's share of a step goes into the fp32 accumulator as
// 16-byte reductions.
#pragma once

#include "common.cuh"
#include "ptx.cuh"

namespace flashlab::gpu::backward_steps {

// The query tiles of Br rows of one query head that see the KV tile whose first key is k0:
// from the tile of the first row that sees key k0 (every row sees it without the causal
// mask) to the last.
struct QueryTiles {
  int begin, count;
};
template <int Br>
__device__ __forceinline__ QueryTiles query_tiles(const Problem& p, int k0) {
  const int Tr = (p.n_q + Br - 1) / Br;
  const int first_row = p.causal ? max(0, k0 - p.causal_offset) : 0;  // key k0 <= row + offset
  const int begin = first_row >= p.n_q ? Tr : first_row / Br;
  return {begin, Tr - begin};
}

// One step of a block's loop: query tile [q0, q0 + Br) of query head h.
struct Step {
  int h, q0;
};

// Step s of KV head hk's block: query tile begin + s % count of query head
// hk * group + s / count (the group's query heads one after the other).
template <int Br>
__device__ __forceinline__ Step step_of(const QueryTiles& tiles_i, int hk, int group, int s) {
  return {hk * group + s / tiles_i.count, (tiles_i.begin + s % tiles_i.count) * Br};
}

// One n8 tile of dQ (16 rows, columns [n0, n0 + 8)) added into the accumulator with
// red.global.add.v4.f32: lane (g, t) holds (g, 2t..2t+1) and (g + 8, 2t..2t+1) (mma.sync's
// C fragment, and a wgmma accumulator's per warp); lanes 2k and 2k + 1 swap a pair, so that
// the even lane holds four consecutive floats of row g and the odd lane four of row g + 8:
// one 16-byte reduction per lane instead of four scalar atomics. row is the accumulator row
// of fragment row g; rows past n_q are skipped (after the shuffle, which every lane takes
// part in). rC: the tile's four floats, elements 0, 1 of row g and 2, 3 of row g + 8.
template <int D>
__device__ __forceinline__ void add_dq_tile(float* gdQacc, float c0, float c1, float c2, float c3,
                                            int row, int n0, int n_q, int lane) {
  const bool even = lane % 2 == 0;
  // The even lane gives away row g + 8's pair, the odd lane row g's.
  const float give0 = even ? c2 : c0, give1 = even ? c3 : c1;
  const float got0 = __shfl_xor_sync(kFullWarp, give0, 1);
  const float got1 = __shfl_xor_sync(kFullWarp, give1, 1);
  const int r = even ? row : row + 8;
  const int c = n0 + (lane % 4) * 2 - (even ? 0 : 2);  // a multiple of 4: 16-byte aligned
  if (r >= n_q) return;
  float* dst = gdQacc + int64_t(r) * D + c;
  if (even)
    ptx::red_add_v4(dst, c0, c1, got0, got1);
  else
    ptx::red_add_v4(dst, got0, got1, c2, c3);
}

}  // namespace flashlab::gpu::backward_steps

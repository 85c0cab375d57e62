// Dropout on the GPU, bit for bit the CPU reference's (cpu_reference dropout.hpp): the keep
// decision of weight (row, column) of (batch, query head) is a pure function of
// (seed, offset, batch, head, row, column), so any thread draws it for any weight, in any
// order, and the backward pass draws the same mask again instead of storing it.
//   kept  <=>  philox4x32_10(counter = (column / 4, row, batch * 2^16 + head, offset),
//                            key     = (seed low 32 bits, seed high 32 bits))[column % 4]
//              >= floor(p * 2^32)
// The constants and the counter's layout come from the very header the CPU reference uses
// (flashlab/cpu/philox_rule.hpp): there is one copy of them.
//
// Where the mask is applied:
//   - fa2's forward (03_fa2.cu) on W = exp(S - m') in registers, after l has summed W and
//     before W V: U += (W o Z) V with Z = 0 or 1/(1 - p), exactly flashlab::cpu::accumulate.
//     L = m + log l is therefore the log-sum-exp of the undropped scores.
//   - the mask export (dropout_mask.cu), which writes the decisions out for tests and lessons.
//   - the backward kernel replays it through dropout_keep_m16n8 on its recomputed P, in the
//     same fragments (dV += (P o Z)^T dO; dP o Z before dS), with the same Problem::dropout.
// Cost: one Philox call (10 rounds of 2 __umulhi, 2 multiplications and 4 xors) per four
// weights; an m16n8 fragment of 32 lanes x 4 weights takes 32 calls, one per lane.
#pragma once

#include "flashlab/cpu/philox_rule.hpp"
#include "problem.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace flashlab::gpu {

// Philox4x32-10 of counter (c.x, c.y, c.z, c.w) under key (k.x, k.y): word for word
// flashlab::cpu::philox4x32_10 (philox.cpp). __umulhi gives the high half of the 64-bit
// product, the plain 32-bit product its low half.
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
  for (int r = 0; r < cpu::kPhiloxRounds; ++r) {
    if (r > 0) {  // the key advances between rounds, not before the first
      k.x += cpu::kPhiloxWeyl0;
      k.y += cpu::kPhiloxWeyl1;
    }
    const uint32_t hi0 = __umulhi(cpu::kPhiloxMultiplier0, c.x);
    const uint32_t lo0 = cpu::kPhiloxMultiplier0 * c.x;
    const uint32_t hi1 = __umulhi(cpu::kPhiloxMultiplier1, c.z);
    const uint32_t lo1 = cpu::kPhiloxMultiplier1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
  }
  return c;
}

// The counter word of (batch, query head): batch * 2^16 + head (cpu::dropout_head_word).
__device__ __forceinline__ uint32_t dropout_head_word(int batch, int head) {
  return (uint32_t(batch) << cpu::kHeadBits) | uint32_t(head);
}

// The four Philox words of columns [4 group, 4 group + 4) of `row`.
__device__ __forceinline__ uint4 dropout_words(const DropoutRule& rule, uint32_t head_word,
                                               uint32_t row, uint32_t group) {
  return philox4x32_10(make_uint4(group, row, head_word, rule.offset),
                       make_uint2(rule.key0, rule.key1));
}

// Whether weight (row, column) of head_word is kept: one weight, one Philox call.
__device__ __forceinline__ bool dropout_keep(const DropoutRule& rule, uint32_t head_word,
                                             uint32_t row, uint64_t column) {
  const uint4 w =
      dropout_words(rule, head_word, row, uint32_t(column / cpu::kColumnsPerPhiloxCall));
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  return words[column % cpu::kColumnsPerPhiloxCall] >= rule.threshold;
}

// The decisions of the four columns one call covers: bit i is set when column 4 group + i
// of `row` is kept.
__device__ __forceinline__ unsigned dropout_keep4(const DropoutRule& rule, uint32_t head_word,
                                                  uint32_t row, uint32_t group) {
  const uint4 w = dropout_words(rule, head_word, row, group);
  return unsigned(w.x >= rule.threshold) | unsigned(w.y >= rule.threshold) << 1 |
         unsigned(w.z >= rule.threshold) << 2 | unsigned(w.w >= rule.threshold) << 3;
}

// The decisions of one mma.sync m16n8 accumulator fragment (the C or D operand of m16n8k16):
// lane l holds elements 0, 1 at (row_g, col), (row_g, col + 1) and elements 2, 3 at
// (row_g + 8, col), (row_g + 8, col + 1), where row_g is the global row of fragment row
// l / 4 and col = n0 + 2 (l % 4). Returns bit e set when element e is kept.
// n0, the global column of the fragment's first column, must be a multiple of 8: then a
// lane's two columns are words (0, 1) or (2, 3) of one call, and the two lanes 2k, 2k + 1
// of a quad share their calls. Each draws the call of one of their two rows (the even lane
// row_g, the odd lane row_g + 8) and hands the partner the two words it needs: one Philox
// call per lane instead of two. Every lane of the warp must call it together (shuffles).
__device__ __forceinline__ unsigned dropout_keep_m16n8(const DropoutRule& rule,
                                                       uint32_t head_word, int row_g, int n0,
                                                       int lane) {
  constexpr unsigned kFullWarp = 0xffffffffu;
  const bool even = lane % 2 == 0;
  const uint32_t group = uint32_t(n0 / 4 + (lane % 4) / 2);
  const uint4 w = dropout_words(rule, head_word, uint32_t(even ? row_g : row_g + 8), group);
  // Even lanes own columns 4 group + {0, 1}, odd lanes 4 group + {2, 3}.
  const uint32_t own0 = even ? w.x : w.z, own1 = even ? w.y : w.w;
  const uint32_t got0 = __shfl_xor_sync(kFullWarp, even ? w.z : w.x, 1);
  const uint32_t got1 = __shfl_xor_sync(kFullWarp, even ? w.w : w.y, 1);
  // Row row_g: the even lane drew it, row row_g + 8: the odd lane.
  const uint32_t e0 = even ? own0 : got0, e1 = even ? own1 : got1;
  const uint32_t e2 = even ? got0 : own0, e3 = even ? got1 : own1;
  return unsigned(e0 >= rule.threshold) | unsigned(e1 >= rule.threshold) << 1 |
         unsigned(e2 >= rule.threshold) << 2 | unsigned(e3 >= rule.threshold) << 3;
}

// W o Z on one fragment: a kept weight times 1/(1 - p), a dropped one 0 (bit e of keep is
// element e, as dropout_keep_m16n8 returns it).
__device__ __forceinline__ void apply_dropout(float (&w)[4], unsigned keep, float keep_scale) {
#pragma unroll
  for (int e = 0; e < 4; ++e) w[e] = (keep >> e) & 1u ? w[e] * keep_scale : 0.0f;
}

}  // namespace flashlab::gpu

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
//   - the backward replays it on its recomputed P with the same Problem::dropout: the main
//     kernel (04_fa2_backward.cu) through dropout_keep_m16n8_t on its transposed fragments
//     P^T, dP^T (dV += (P o Z)^T dO; dS = P o (dP o Z - D)), the dQ kernel of the
//     deterministic mode (04_fa2_backward_dq.cu) through dropout_keep_m16n8 on P, dP.
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

// The same decisions for a transposed fragment, as the backward's main kernel holds S^T and
// P^T (04_fa2_backward.cu): rows are keys, columns are query rows. Lane l holds elements 0, 1
// at (key_g, q), (key_g, q + 1) and elements 2, 3 at (key_g + 8, q), (key_g + 8, q + 1),
// where key_g = key0 + l / 4 and q = q0 + 2 (l % 4); the mask is still indexed by
// (query row, key), so one Philox call now covers four keys, that is four fragment rows.
// key0 must be a multiple of 4 (16 keys = 4 calls per query) and q0 a multiple of 8. The
// fragment's 16 keys x 8 queries need 4 x 8 = 32 calls: lane l draws the one of key group
// l / 8 (keys key0 + 4 (l / 8) .. + 3) and query q0 + l % 8, keeps the four decisions as a
// nibble, and three shuffles hand every lane its four bits: one Philox call per lane.
// Returns bit e set when element e is kept. Every lane of the warp must call it together.
__device__ __forceinline__ unsigned dropout_keep_m16n8_t(const DropoutRule& rule,
                                                         uint32_t head_word, int key0, int q0,
                                                         int lane) {
  constexpr unsigned kFullWarp = 0xffffffffu;
  const uint32_t group = uint32_t(key0 / cpu::kColumnsPerPhiloxCall + lane / 8);
  const unsigned nibble = dropout_keep4(rule, head_word, uint32_t(q0 + lane % 8), group);
  // Lanes 2k, 2k + 1 draw queries 2k, 2k + 1 of one key group: each gets the other's nibble,
  // so both hold the byte (query 2k: bits 0..3, query 2k + 1: bits 4..7).
  const unsigned other = __shfl_xor_sync(kFullWarp, nibble, 1);
  const unsigned byte = lane % 2 == 0 ? nibble | other << 4 : other | nibble << 4;
  // Lane (g, t) = (l / 4, l % 4): keys g and g + 8 are key groups g / 4 and 2 + g / 4, word
  // g % 4 of each; its queries 2t, 2t + 1 are the byte of lane 8 group + 2t.
  const int g = lane / 4, t = lane % 4, word = g % 4;
  const unsigned key_g_bits = __shfl_sync(kFullWarp, byte, (g / 4) * 8 + 2 * t);
  const unsigned key_g8_bits = __shfl_sync(kFullWarp, byte, (2 + g / 4) * 8 + 2 * t);
  return (key_g_bits >> word & 1u) | (key_g_bits >> (4 + word) & 1u) << 1 |
         (key_g8_bits >> word & 1u) << 2 | (key_g8_bits >> (4 + word) & 1u) << 3;
}

// W o Z on one fragment: a kept weight times 1/(1 - p), a dropped one 0 (bit e of keep is
// element e, as dropout_keep_m16n8 returns it).
__device__ __forceinline__ void apply_dropout(float (&w)[4], unsigned keep, float keep_scale) {
#pragma unroll
  for (int e = 0; e < 4; ++e) w[e] = (keep >> e) & 1u ? w[e] * keep_scale : 0.0f;
}

}  // namespace flashlab::gpu

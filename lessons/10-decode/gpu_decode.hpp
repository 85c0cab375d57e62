// Lesson 10's GPU step: flashlab's split-KV decode (gpu/kernels/05_*.cu, through the GPU
// runner) on ANCHORS.md's decode shape: the split count against time and against the bytes
// of K and V it reads, a contiguous cache against paged ones, and the CPU reference's decode
// (fp32) on the same bf16-rounded inputs for the error, held to ANCHORS.md's 2x rule against
// the naive attention computed in bf16.
//
// One decoding step reads every valid key and value once (GQA packing: the query heads that
// share a KV head share its read), E bytes per element:
//   K and V bytes = 2 E d Hkv sum_b len_b
// and splitting adds the partial states, written by the split kernel and read by the combine:
//   state bytes   = 2 * 4 F B Hq N_q splits, F = (d + 2) floats padded to whole 32-byte
//                   sectors (decode::state_floats: 136 at d = 128).
#pragma once

#include "kit/lesson_context.hpp"

#include "flashlab/cpu/types.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <vector>

namespace flashlab::app {

// ANCHORS.md's decode shape, which the lesson's steps share: batch 8, 32 query heads over 8 KV
// heads, d = 128, one new token, bf16. (Each step chooses its own cache length.)
namespace decode_shape {
inline constexpr cpu::Index kBatch = 8, kHeadsQ = 32, kHeadsKV = 8, kD = 128, kNq = 1;
inline constexpr cpu::Index kGroup = kHeadsQ / kHeadsKV;  // query heads a KV head serves
// The pages a serving engine's allocator might use, in keys (decode.h's range holds them).
inline constexpr cpu::Index kPageSizes[] = {16, 64, 256};
// The split kernel's blocks for one split of `batch` sequences: one per (sequence, KV head,
// row block of the KV head's packed query rows).
constexpr cpu::Index blocks_a_split(cpu::Index batch) {
  return batch * kHeadsKV * gpu::decode::row_blocks(kGroup, kNq);
}
}  // namespace decode_shape

double kv_bytes(cpu::Index heads_kv, cpu::Index d, const std::vector<cpu::Index>& seq_lens,
                int element_bytes);
double state_bytes(cpu::Index batch, cpu::Index heads_q, cpu::Index n_q, cpu::Index d, int splits);

void gpu_decode_step(LessonContext& ctx);

}  // namespace flashlab::app

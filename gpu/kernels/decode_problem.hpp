// One decode call as the split and combine kernels see it: validated, defaults resolved,
// the split count chosen. Plain data only, shared by .cu and .cpp files.
#pragma once

#include "flashlab/gpu/kernel_info.hpp"
#include "problem.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

namespace flashlab::gpu {

struct DecodeProblem {
  const void* q = nullptr;  // (B, Hq, N_q, d)
  const void* k = nullptr;  // contiguous (B, Hkv, capacity, d) or paged (pages, Hkv, page, d)
  const void* v = nullptr;
  void* o = nullptr;                               // (B, Hq, N_q, d)
  float* lse = nullptr;                            // (B, Hq, N_q) contiguous, or null
  const int32_t* seq_lens = nullptr;               // (B)
  const int32_t* block_table = nullptr;            // (B, pages per sequence), or null: contiguous
  Strides q_stride, k_stride, v_stride, o_stride;  // k, v: `batch` is the page stride if paged
  int64_t block_table_stride = 0;
  int page_shift = 0;  // log2(page_size) when paged
  int num_pages = 0;
  int batch = 0, heads_q = 0, heads_kv = 0, n_q = 0, capacity = 0, d = 0;
  int group_size = 1;  // heads_q / heads_kv
  int row_blocks = 1;  // decode::row_blocks(group_size, n_q)
  int splits = 1;
  float scale = 0.0f;
  flashlab_dtype dtype = FLASHLAB_BF16;
  bool kv_evict_first = false;  // decode::kv_evict_first(kv_l2_policy, ...): K and V loads' L2 hint
  bool queue = false;           // decode::uses_queue(grid): persistent blocks (05_decode_queue.cu)
  // The workspace: the error word (4 x uint32: bits, bad-length entry + 1, bad-page entry +
  // 1, the bad page index) and the queue's counter (1 x uint32, the items claimed so far), all
  // zeroed before the split kernel; then the states, (B, Hq, N_q, splits,
  // decode::state_floats(d)) fp32.
  uint32_t* error_word = nullptr;
  float* states = nullptr;

  // The blocks of one split (the split grid), or the queue's items of one piece: one per
  // (batch entry, KV head, row block); and the queue's items in all.
  FLASHLAB_HOST_DEVICE int items_per_piece() const { return batch * heads_kv * row_blocks; }
  FLASHLAB_HOST_DEVICE int queue_items() const { return splits * items_per_piece(); }
};

// A query row's end, where the combine merges its splits and where a lone split's merge
// ends it (decode::split_kernel_ends_rows): O = U x row_inv_l(l) rounded to the input dtype,
// LSE = row_lse(m, l) (natural log). A row that saw no key (l = 0: a zero-length sequence)
// gets O = 0 and LSE = -inf, the reference's convention.
FLASHLAB_HOST_DEVICE float row_inv_l(float l) { return l == 0.0f ? 0.0f : 1.0f / l; }
FLASHLAB_HOST_DEVICE float row_lse(float m, float l) { return l == 0.0f ? -INFINITY : m + logf(l); }

// Offsets of the error word's fields, then of the queue's counter, in the workspace's header.
inline constexpr int kErrorBits = 0, kErrorLengthEntry = 1, kErrorPageEntry = 2,
                     kErrorPageIndex = 3, kErrorWords = 4;
inline constexpr int kQueueCounterWord = kErrorWords, kHeaderWordsZeroed = kErrorWords + 1;
static_assert(kHeaderWordsZeroed * 4 <= decode::kWorkspaceHeaderBytes);

// 05_decode_split_kv.cu (or 05_decode_queue.cu where problem.queue), then
// 05_decode_combine.cu, on the same stream, unless one split ends its rows itself
// (decode::split_kernel_ends_rows); sm_count sizes the queue's persistent grid.
void launch_decode_split_kv(const DecodeProblem& problem, cudaStream_t stream);
void launch_decode_queue(const DecodeProblem& problem, int sm_count, cudaStream_t stream);
void launch_decode_combine(const DecodeProblem& problem, cudaStream_t stream);

}  // namespace flashlab::gpu

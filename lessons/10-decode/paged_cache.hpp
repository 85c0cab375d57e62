// PagedAttention's bookkeeping, counted. A serving engine that stores each request's KV cache
// contiguously must reserve, when the request starts, room for the longest it may grow
// (max_len keys); a paged cache (Kwon et al. 2023, vLLM) hands out pages of page_size keys as
// the sequence grows, found through a block table (gpu_bridge/block_table.hpp), so a
// sequence of len keys holds ceil(len / page_size) pages and wastes less than one page:
//   contiguous: reserved = max_len,                         wasted = max_len - len
//   paged:      reserved = ceil(len / page_size) page_size, wasted = (-len) mod page_size
// What the table costs the decode kernel (05_decode_split_kv.cu) is the decode mirror's to
// count (simulator/src/decode_kernel_program.cpp: the sectors of each split's entries).
#pragma once

#include <cstdint>
#include <span>

namespace flashlab::app {

struct CacheUse {
  std::int64_t used = 0;      // keys the sequences hold
  std::int64_t reserved = 0;  // keys of memory set aside for them
  std::int64_t wasted() const { return reserved - used; }
  double wasted_share() const { return reserved > 0 ? double(wasted()) / double(reserved) : 0; }
};

// Throws std::invalid_argument for a length < 1 or > max_len, or max_len < 1.
CacheUse contiguous_use(std::span<const std::int64_t> lengths, std::int64_t max_len);
// Throws std::invalid_argument for a length < 1 or page_size < 1.
CacheUse paged_use(std::span<const std::int64_t> lengths, std::int64_t page_size);

}  // namespace flashlab::app

// A paged KV cache's block table, shuffled as a serving engine's allocator leaves it after
// many requests: sequence b's page p (its keys [p page_size, (p + 1) page_size)) lives in
// physical page table[b * pages_per_seq + p]. Every sequence gets pages for the whole
// capacity, ceil(max_seq_len / page_size), and every physical page is used exactly once:
//   num_pages = batch * pages_per_seq.
// The order is a Fisher-Yates shuffle driven by splitmix64 from `seed`, the same on every
// machine. Used by the GPU runner plugin to lay out the cache, and tested without a GPU.
#pragma once

#include <cstdint>
#include <vector>

namespace flashlab::app {

struct BlockTable {
  int64_t page_size = 0;
  int64_t pages_per_seq = 0;  // ceil(max_seq_len / page_size)
  int64_t num_pages = 0;      // batch * pages_per_seq
  std::vector<int32_t> table; // (batch, pages_per_seq), row-major
  // The capacity of one sequence in keys, pages_per_seq * page_size >= max_seq_len.
  int64_t capacity() const { return pages_per_seq * page_size; }
};

// Throws std::invalid_argument, saying what would be right, for batch < 1, max_seq_len < 1,
// page_size not a power of two >= 1, or more pages than an int32 index holds.
BlockTable shuffled_block_table(int64_t batch, int64_t max_seq_len, int64_t page_size,
                                uint64_t seed);

}  // namespace flashlab::app

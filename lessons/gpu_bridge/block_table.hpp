// A paged KV cache's block table, shuffled as a serving engine's allocator leaves it after
// many requests: sequence b's page p (its keys [p page_size, (p + 1) page_size)) lives in
// physical page table[b * pages_per_seq + p]. Every sequence gets pages for the whole
// capacity, ceil(max_seq_len / page_size), and every physical page is used exactly once:
//   num_pages = batch * pages_per_seq.
// The order is a Fisher-Yates shuffle driven by splitmix64 from `seed`, the same on every
// machine. Used by the GPU runner plugin to lay out the cache, and tested without a GPU.
// to_pages() moves a contiguous cache into that layout.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace flashlab::app {

struct BlockTable {
  int64_t page_size = 0;
  int64_t pages_per_seq = 0;   // ceil(max_seq_len / page_size)
  int64_t num_pages = 0;       // batch * pages_per_seq
  std::vector<int32_t> table;  // (batch, pages_per_seq), row-major
  // The capacity of one sequence in keys, pages_per_seq * page_size >= max_seq_len.
  int64_t capacity() const { return pages_per_seq * page_size; }
};

// Throws std::invalid_argument, saying what would be right, for batch < 1, max_seq_len < 1,
// page_size not a power of two >= 1, or more pages than an int32 index holds.
BlockTable shuffled_block_table(int64_t batch, int64_t max_seq_len, int64_t page_size,
                                uint64_t seed);

// A contiguous cache (batch, heads, max_seq_len, d), row-major, laid out as pages
// (num_pages, heads, page_size, d): key j of sequence b, head h lands in row j % page_size
// of page table[b * pages_per_seq + j / page_size]. Rows past max_seq_len in a sequence's
// last page stay T(0).
template <class T>
std::vector<T> to_pages(const std::vector<T>& cache, int64_t batch, int64_t heads,
                        int64_t max_seq_len, int64_t d, const BlockTable& t) {
  const int64_t ps = t.page_size;
  std::vector<T> paged(std::size_t(t.num_pages * heads * ps * d), T(0.0f));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t page = 0; page < t.pages_per_seq; ++page) {
      const int64_t physical = t.table[std::size_t(b * t.pages_per_seq + page)];
      const int64_t keys = std::min(ps, max_seq_len - page * ps);
      for (int64_t h = 0; h < heads; ++h) {
        const T* from = cache.data() + ((b * heads + h) * max_seq_len + page * ps) * d;
        std::copy(from, from + keys * d, paged.data() + (physical * heads + h) * ps * d);
      }
    }
  return paged;
}

}  // namespace flashlab::app

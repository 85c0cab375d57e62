#include "gpu_bridge/block_table.hpp"

#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace flashlab::app {

namespace {

// splitmix64: a tiny, well-mixed 64-bit generator whose sequence is fixed by its seed.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

BlockTable shuffled_block_table(int64_t batch, int64_t max_seq_len, int64_t page_size,
                                uint64_t seed) {
  if (batch < 1 || max_seq_len < 1)
    throw std::invalid_argument("a block table needs batch >= 1 and max_seq_len >= 1, not " +
                                std::to_string(batch) + " and " + std::to_string(max_seq_len));
  if (page_size < 1 || (page_size & (page_size - 1)) != 0)
    throw std::invalid_argument("page_size = " + std::to_string(page_size) +
                                " is not a power of two (16, 64 and 256 are the usual ones)");
  BlockTable t;
  t.page_size = page_size;
  t.pages_per_seq = (max_seq_len + page_size - 1) / page_size;
  if (t.pages_per_seq > std::numeric_limits<int32_t>::max() / batch)
    throw std::invalid_argument(std::to_string(batch) + " sequences of " +
                                std::to_string(t.pages_per_seq) +
                                " pages are more pages than an int32 block table can index");
  t.num_pages = batch * t.pages_per_seq;
  t.table.resize(std::size_t(t.num_pages));
  std::iota(t.table.begin(), t.table.end(), 0);
  uint64_t state = seed;
  for (int64_t i = t.num_pages - 1; i > 0; --i) {
    const auto j = int64_t(splitmix64(state) % uint64_t(i + 1));
    std::swap(t.table[std::size_t(i)], t.table[std::size_t(j)]);
  }
  return t;
}

}  // namespace flashlab::app

#include "10-decode/paged_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace flashlab::app {

namespace {

void check_length(std::int64_t len) {
  if (len < 1)
    throw std::invalid_argument("a sequence of " + std::to_string(len) +
                                " keys has no cache: lengths start at 1");
}

}  // namespace

CacheUse contiguous_use(std::span<const std::int64_t> lengths, std::int64_t max_len) {
  if (max_len < 1)
    throw std::invalid_argument("max_len = " + std::to_string(max_len) + " must be at least 1");
  CacheUse u;
  for (const std::int64_t len : lengths) {
    check_length(len);
    if (len > max_len)
      throw std::invalid_argument("a sequence of " + std::to_string(len) +
                                  " keys does not fit the " + std::to_string(max_len) +
                                  " reserved for it: raise max_len");
    u.used += len;
    u.reserved += max_len;
  }
  return u;
}

CacheUse paged_use(std::span<const std::int64_t> lengths, std::int64_t page_size) {
  if (page_size < 1)
    throw std::invalid_argument("page_size = " + std::to_string(page_size) +
                                " must be at least 1 key");
  CacheUse u;
  for (const std::int64_t len : lengths) {
    check_length(len);
    u.used += len;
    u.reserved += (len + page_size - 1) / page_size * page_size;
  }
  return u;
}

std::int64_t table_reads(std::int64_t len, std::int64_t splits, std::int64_t page_size,
                         std::int64_t tile) {
  if (len < 1 || splits < 1 || page_size < 1 || tile < 1)
    throw std::invalid_argument(
        "table_reads needs len, splits, page_size and tile of at least 1, not " +
        std::to_string(len) + ", " + std::to_string(splits) + ", " + std::to_string(page_size) +
        ", " + std::to_string(tile));
  const std::int64_t tiles = (len + tile - 1) / tile, q = (tiles + splits - 1) / splits;
  std::int64_t reads = 0;
  for (std::int64_t s = 0; s < splits && s * q * tile < len; ++s) {
    const std::int64_t k0 = s * q * tile, k1 = std::min((s + 1) * q * tile, len);
    reads += (k1 - 1) / page_size - k0 / page_size + 1;  // the pages of keys [k0, k1)
  }
  return reads;
}

}  // namespace flashlab::app

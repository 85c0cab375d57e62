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

}  // namespace flashlab::app

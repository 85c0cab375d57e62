#include "l2_cache.hpp"

#include "flashlab/cpu/philox.hpp"

#include <stdexcept>

namespace flashlab::sim::detail {

namespace {
// A tile's key: the tensor in the high bits, its first row (below 2^40) in the low ones.
constexpr int kRowBits = 40;
std::uint64_t key_of(int tensor, std::int64_t row) {
  return (static_cast<std::uint64_t>(tensor) << kRowBits) | static_cast<std::uint64_t>(row);
}
}  // namespace

void L2Cache::access(int tensor, std::int64_t row0, Bytes bytes, bool write,
                     std::vector<TensorTraffic>& tensors, std::int64_t times) {
  if (bytes > capacity_) {  // cannot be cached at all
    (write ? tensors[tensor].dram_written : tensors[tensor].dram_read) += bytes * times;
    tell(L2EventKind::bypass, tensor, row0, bytes, write);
    return;
  }
  const std::uint64_t key = key_of(tensor, row0);
  const auto hit = where_.find(key);
  if (hit != where_.end()) {  // move to the front; a write makes it dirty
    const bool leading_part = !write && bytes < hit->second->bytes;
    if (hit->second->bytes != bytes && !leading_part)
      throw std::logic_error("a program moved tiles of " + tensors[tensor].name +
                             " that overlap but differ; the L2 model knows a tile by its "
                             "first row");
    hit->second->dirty = hit->second->dirty || write;
    lru_.splice(lru_.begin(), lru_, hit->second);
    tell(L2EventKind::hit, tensor, row0, bytes, write);
    return;
  }
  evict_until_fits(bytes, tensors);
  if (!write) tensors[tensor].dram_read += bytes;
  tell(write ? L2EventKind::allocate : L2EventKind::miss, tensor, row0, bytes, write);
  place(tensor, row0, bytes, write);
}

void L2Cache::copy_in(int tensor, std::int64_t row0, Bytes bytes,
                      std::vector<TensorTraffic>& tensors) {
  evict_until_fits(bytes, tensors);
  tell(L2EventKind::copy, tensor, row0, bytes, /*write=*/false);
  place(tensor, row0, bytes, /*dirty=*/false);
}

void L2Cache::place(int tensor, std::int64_t row0, Bytes bytes, bool dirty) {
  const std::uint64_t key = key_of(tensor, row0);
  lru_.push_front({key, tensor, row0, bytes, dirty, resident_.size()});
  where_[key] = lru_.begin();
  resident_.push_back(lru_.begin());
  in_use_ += bytes;
}

std::list<L2Cache::Line>::iterator L2Cache::victim() {
  if (replacement_ == L2Replacement::lru) return std::prev(lru_.end());
  // Any resident tile, each as likely: a 64-bit word from Philox, scaled to the count.
  const cpu::PhiloxCounter word = cpu::philox4x32_10(
      {static_cast<std::uint32_t>(evictions_), static_cast<std::uint32_t>(evictions_ >> 32),
       static_cast<std::uint32_t>(partition_), 0},
      {static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32)});
  const std::uint64_t r = (std::uint64_t{word[0]} << 32) | word[1];
  return resident_[static_cast<std::size_t>(
      (static_cast<unsigned __int128>(r) * resident_.size()) >> 64)];
}

void L2Cache::drop(std::list<Line>::iterator line) {
  in_use_ -= line->bytes;
  where_.erase(line->key);
  resident_[line->slot] = resident_.back();  // the last line takes its place
  resident_[line->slot]->slot = line->slot;
  resident_.pop_back();
  lru_.erase(line);
}

void L2Cache::evict_until_fits(Bytes bytes, std::vector<TensorTraffic>& tensors) {
  while (in_use_ + bytes > capacity_) {
    const auto line = victim();
    ++evictions_;
    if (line->dirty) tensors[line->tensor].dram_written += line->bytes;
    tell(line->dirty ? L2EventKind::write_back : L2EventKind::evict, line->tensor, line->row0,
         line->bytes, line->dirty);
    drop(line);
  }
}

void L2Cache::flush(std::vector<TensorTraffic>& tensors) {
  for (Line& line : lru_) {
    if (line.dirty) tensors[line.tensor].dram_written += line.bytes;
    line.dirty = false;
  }
}

void L2Cache::clear() {
  lru_.clear();
  resident_.clear();
  where_.clear();
  in_use_ = 0;
}

bool L2Cache::holds(int tensor, std::int64_t row0) const {
  return where_.contains(key_of(tensor, row0));
}

void L2Cache::add_dirty(std::vector<Bytes>& dirty) const {
  for (const Line& line : lru_)
    if (line.dirty) dirty[line.tensor] += line.bytes;
}

std::vector<std::int64_t> L2Cache::signature(const std::vector<int>& moving,
                                             std::int64_t origin) const {
  std::vector<std::int64_t> out;
  out.reserve(4 * lru_.size());
  for (const Line& line : lru_) {
    const bool moves = std::find(moving.begin(), moving.end(), line.tensor) != moving.end();
    out.insert(out.end(), {line.tensor, moves ? line.row0 - origin : line.row0, line.bytes,
                           line.dirty ? 1 : 0});
  }
  return out;
}

void L2Cache::shift(const std::vector<int>& moving, std::int64_t rows) {
  where_.clear();
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (std::find(moving.begin(), moving.end(), it->tensor) != moving.end()) {
      it->row0 += rows;
      it->key = key_of(it->tensor, it->row0);
    }
    where_[it->key] = it;
  }
}

}  // namespace flashlab::sim::detail

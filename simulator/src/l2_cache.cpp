#include "l2_cache.hpp"

#include "flashlab/cpu/philox.hpp"
#include "flashlab/cpu/types.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

namespace flashlab::sim::detail {

namespace {
// A tile's key: the tensor in the high bits, its first row (below 2^40) in the low ones.
constexpr int kRowBits = 40;
std::uint64_t key_of(int tensor, std::int64_t row) {
  return (static_cast<std::uint64_t>(tensor) << kRowBits) | static_cast<std::uint64_t>(row);
}
// SplitMix64's finaliser: a 64-bit mix whose every output bit depends on every input bit.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
// A home copy's key: its tile's with the top bit set (tensors stay far below 2^23), so that
// it hashes to a set of its own and is never taken for the line itself.
constexpr std::uint64_t kHomeCopy = std::uint64_t{1} << 63;
// Mixed into a line's hash for its home partition, apart from its set's.
constexpr std::uint64_t kHomeSalt = 0x486F6D6550617274ULL;
// The partition a line is homed in, of `partitions`: the one hash every L2 model takes.
int home_by_key(std::uint64_t key, std::int64_t line, std::uint64_t seed, int partitions) {
  const std::uint64_t h = mix64(mix64(key ^ kHomeSalt) ^ static_cast<std::uint64_t>(line) ^ seed);
  return static_cast<int>(h % static_cast<std::uint64_t>(partitions));
}
}  // namespace

L2Cache::L2Cache(Bytes capacity, int partition, L2Replacement replacement, std::uint64_t seed,
                 int home_partitions, Bytes dirty_cap, int ways, int reduced_window)
    : capacity_(capacity),
      partition_(partition),
      replacement_(replacement),
      seed_(seed),
      home_partitions_(home_partitions),
      set_ways_(static_cast<std::size_t>(ways)),
      dirty_cap_(dirty_cap) {
  check(replacement);
  check_l2_ways(ways);
  check_l2_reduced_window(reduced_window, ways, replacement);
  reduced_window_ = static_cast<std::size_t>(reduced_window);
  if (dirty_cap_ < 0 || dirty_cap_ > capacity_)
    throw cpu::InvalidArgument(fmt::format(
        "a dirty cap of {} bytes on an L2 (partition) of {} bytes: give 0 for no cap, or 1 to "
        "{} bytes, the most it holds dirty",
        dirty_cap_, capacity_, capacity_));
  if (home_partitions_ < 1 || (home_partitions_ > 1 && replacement_ != L2Replacement::sets))
    throw std::logic_error("lines go home only in an L2 of hashed sets, of 1 partition or more");
  if (replacement_ == L2Replacement::sets) {
    if (capacity_ > kMaxSetsL2Bytes)
      throw cpu::InvalidArgument(fmt::format(
          "an L2 of {} bytes in hashed sets: the model keeps a record of every line, give at "
          "most {} bytes (a GPU's L2 is tens of MiB), or the lru policy",
          capacity_, kMaxSetsL2Bytes));
    sets_ = static_cast<std::size_t>(std::max<Bytes>(1, capacity_ / (ways * kL2LineBytes)));
    ways_.assign(sets_ * set_ways_, Way{});
    tags_.assign(ways_.size(), 0);
    used_.assign(ways_.size(), 0);
  }
}

std::size_t L2Cache::set_of(std::uint64_t key, std::int64_t line) const {
  const std::uint64_t h = mix64(mix64(mix64(key) ^ static_cast<std::uint64_t>(line)) ^ seed_ ^
                                (static_cast<std::uint64_t>(partition_) << 56));
  return static_cast<std::size_t>((static_cast<unsigned __int128>(h) * sets_) >> 64);
}

const L2Cache::Way* L2Cache::find_line(std::uint64_t key, std::int64_t line) const {
  const std::size_t first = set_of(key, line) * set_ways_;
  const std::uint32_t tag = tag_of(key, line);
  for (std::size_t w = first; w < first + set_ways_; ++w) {
    if (tags_[w] != tag) continue;  // the tags filter; the way itself decides
    const Way& way = ways_[w];
    if (way.tensor >= 0 && way.key == key && way.line == line) return &way;
  }
  return nullptr;
}

bool L2Cache::homed_here(std::uint64_t key, std::int64_t line) const {
  return home_by_key(key, line, seed_, home_partitions_) == 0;
}

L2Cache::Way* L2Cache::find_way(std::uint64_t key, std::int64_t line) {
  return const_cast<Way*>(std::as_const(*this).find_line(key, line));
}

bool L2Cache::touch_line(int tensor, std::int64_t row0, std::int64_t j, Bytes bytes, bool write,
                         bool fetch, std::vector<TensorTraffic>& tensors) {
  const std::uint64_t key = key_of(tensor, row0);
  if (Way* way = find_way(key, j)) {  // a hit
    const Bytes grown = std::max<Bytes>(way->bytes, bytes) - way->bytes;
    if (way->dirty) dirty_bytes_ += grown;
    way->bytes += static_cast<std::int32_t>(grown);
    if (write && !way->dirty) {
      way->dirty = true;
      way->dirtied = became_dirty(key, j, way->bytes);
    }
    used_[index_of(way)] = ++clock_;
    if (reducing_) way->reduced = true;
    if (write) write_back_past_cap(tensors);
    return true;
  }
  // Not here. A line homed elsewhere than its reader's partition is held at its home too: a
  // read finds it there without DRAM while it lasts, and one that came from DRAM, or was
  // written, takes room at its home as well.
  const bool homed_elsewhere = home_partitions_ > 1 && !homed_here(key, j);
  bool from_home = false;
  if (homed_elsewhere && fetch)
    if (Way* copy = find_way(key | kHomeCopy, j)) {
      used_[index_of(copy)] = ++clock_;
      from_home = true;
    }
  if (fetch && !from_home) tensors[tensor].dram_read += bytes;
  Way placed = way_of(key, j, tensor, bytes, write);
  placed.reduced = reducing_;
  place_way(placed, tensors);
  if (homed_elsewhere && !from_home && (fetch || write))
    place_way(way_of(key | kHomeCopy, j, tensor, bytes, /*dirty=*/false), tensors);
  if (write) write_back_past_cap(tensors);
  return false;
}

void L2Cache::place_way(const Way& way, std::vector<TensorTraffic>& tensors) {
  const std::size_t first = set_of(way.key, way.line) * set_ways_;
  const std::size_t v = victim_way(first);
  Way* victim = &ways_[v];
  if (victim->tensor >= 0) {
    ++evictions_;
    if (victim->dirty) {
      tensors[victim->tensor].dram_written += victim->bytes;
      dirty_bytes_ -= victim->bytes;
    }
    in_use_ -= victim->bytes;
  }
  *victim = way;
  tags_[v] = tag_of(way.key, way.line);
  used_[v] = ++clock_;
  if (way.dirty) victim->dirtied = became_dirty(way.key, way.line, way.bytes);
  in_use_ += way.bytes;
}

std::size_t L2Cache::victim_way(std::size_t first) const {
  // An empty way if there is one (used 0), else the least recently used; the set's stamps
  // alone are read to find it.
  std::size_t v = first;
  for (std::size_t w = first + 1; w < first + set_ways_ && used_[v] != 0; ++w)
    if (used_[w] < used_[v]) v = w;
  if (reduced_window_ == 1 || used_[v] == 0 || !ways_[v].reduced) return v;
  // Reduced lines kept: the least recently used line not reduced into, if fewer than
  // reduced_window_ lines of the set are older than it.
  std::size_t kept = v;  // none found yet
  for (std::size_t w = first; w < first + set_ways_; ++w)
    if (!ways_[w].reduced && (kept == v || used_[w] < used_[kept])) kept = w;
  if (kept == v) return v;
  std::size_t older = 0;
  for (std::size_t w = first; w < first + set_ways_; ++w) older += used_[w] < used_[kept];
  return older < reduced_window_ ? kept : v;
}

void L2Cache::reduce(int tensor, std::int64_t row0, Bytes bytes,
                     std::vector<TensorTraffic>& tensors) {
  access(tensor, row0, bytes, /*write=*/false, tensors);
  reducing_ = true;
  access(tensor, row0, bytes, /*write=*/true, tensors);
  reducing_ = false;
}

void L2Cache::access_lines(int tensor, std::int64_t row0, Bytes bytes, bool write,
                           std::vector<TensorTraffic>& tensors, std::int64_t times) {
  const std::int64_t lines = l2_lines(bytes);
  const auto once = [&] {
    bool all_hit = true;
    for (std::int64_t j = 0; j < lines; ++j)
      all_hit &= touch_line(tensor, row0, j, l2_line_bytes(bytes, j),
                            write, /*fetch=*/!write, tensors);
    return all_hit;
  };
  const bool hit = once();
  tell(hit ? L2EventKind::hit : (write ? L2EventKind::allocate : L2EventKind::miss), tensor, row0,
       bytes, write);
  if (times < 2) return;
  // The same tile again: a second time settles it (a tile with more lines in a set than the
  // set has ways misses them every time, the rest hit); the others repeat the second.
  std::vector<TensorTraffic> before = tensors;
  once();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    tensors[t].dram_read += (times - 2) * (tensors[t].dram_read - before[t].dram_read);
    tensors[t].dram_written += (times - 2) * (tensors[t].dram_written - before[t].dram_written);
  }
}

void L2Cache::access(int tensor, std::int64_t row0, Bytes bytes, bool write,
                     std::vector<TensorTraffic>& tensors, std::int64_t times) {
  if (bytes > capacity_) {  // cannot be cached at all
    (write ? tensors[tensor].dram_written : tensors[tensor].dram_read) += bytes * times;
    tell(L2EventKind::bypass, tensor, row0, bytes, write);
    return;
  }
  if (replacement_ == L2Replacement::sets)
    return access_lines(tensor, row0, bytes, write, tensors, times);
  const std::uint64_t key = key_of(tensor, row0);
  const auto hit = where_.find(key);
  if (hit != where_.end()) {  // move to the front; a write makes it dirty
    const bool leading_part = !write && bytes < hit->second->bytes;
    if (hit->second->bytes != bytes && !leading_part)
      throw std::logic_error("a program moved tiles of " + tensors[tensor].name +
                             " that overlap but differ; the L2 model knows a tile by its "
                             "first row");
    if (write && !hit->second->dirty) {
      hit->second->dirty = true;
      hit->second->dirtied = became_dirty(key, 0, hit->second->bytes);
    }
    lru_.splice(lru_.begin(), lru_, hit->second);
    tell(L2EventKind::hit, tensor, row0, bytes, write);
    if (write) write_back_past_cap(tensors);
    return;
  }
  evict_until_fits(bytes, tensors);
  if (!write) tensors[tensor].dram_read += bytes;
  tell(write ? L2EventKind::allocate : L2EventKind::miss, tensor, row0, bytes, write);
  place(tensor, row0, bytes, write);
  if (write) write_back_past_cap(tensors);
}

void L2Cache::copy_in(int tensor, std::int64_t row0, Bytes bytes,
                      std::vector<TensorTraffic>& tensors) {
  if (replacement_ == L2Replacement::sets) {  // its lines, clean, none read from DRAM
    for (std::int64_t j = 0; j < l2_lines(bytes); ++j)
      touch_line(tensor, row0, j, l2_line_bytes(bytes, j),
                 /*write=*/false, /*fetch=*/false, tensors);
    tell(L2EventKind::copy, tensor, row0, bytes, /*write=*/false);
    return;
  }
  evict_until_fits(bytes, tensors);
  tell(L2EventKind::copy, tensor, row0, bytes, /*write=*/false);
  place(tensor, row0, bytes, /*dirty=*/false);
}

std::vector<std::int64_t> L2Cache::read_lines(int tensor, std::int64_t row0, Bytes bytes,
                                              const HeldFar& held_far,
                                              std::vector<TensorTraffic>& tensors) {
  if (replacement_ != L2Replacement::sets)
    throw std::logic_error("an L2 read line by line is one of hashed sets");
  std::vector<std::int64_t> from_dram;
  bool copied = false;
  for (std::int64_t j = 0; j < l2_lines(bytes); ++j) {
    const bool far = !holds_line(tensor, row0, j) && held_far(j);
    if (touch_line(tensor, row0, j, l2_line_bytes(bytes, j), /*write=*/false, /*fetch=*/!far,
                   tensors))
      continue;
    if (far)
      copied = true;
    else
      from_dram.push_back(j);
  }
  tell(!from_dram.empty() ? L2EventKind::miss : copied ? L2EventKind::copy : L2EventKind::hit,
       tensor, row0, bytes, /*write=*/false);
  return from_dram;
}

bool L2Cache::holds_line(int tensor, std::int64_t row0, std::int64_t line) const {
  return replacement_ == L2Replacement::sets && find_line(key_of(tensor, row0), line) != nullptr;
}

void L2Cache::place_home_copy(int tensor, std::int64_t row0, std::int64_t line, Bytes bytes,
                              std::vector<TensorTraffic>& tensors) {
  if (replacement_ != L2Replacement::sets)
    throw std::logic_error("home copies are lines of an L2 of hashed sets");
  touch_line(tensor, row0, line, l2_line_bytes(bytes, line), /*write=*/false, /*fetch=*/false,
             tensors);
}

void L2Cache::place(int tensor, std::int64_t row0, Bytes bytes, bool dirty) {
  const std::uint64_t key = key_of(tensor, row0);
  lru_.push_front({key, tensor, row0, bytes, dirty, resident_.size()});
  if (dirty) lru_.front().dirtied = became_dirty(key, 0, bytes);
  where_[key] = lru_.begin();
  resident_.push_back(lru_.begin());
  in_use_ += bytes;
}

std::uint64_t L2Cache::became_dirty(std::uint64_t key, std::int64_t line, Bytes bytes) {
  dirty_bytes_ += bytes;
  const std::uint64_t stamp = ++dirtied_;
  if (dirty_cap_ == 0) return stamp;
  // Stale entries are dropped now and then, so the queue stays within twice the L2's lines.
  const std::size_t most_lines = replacement_ == L2Replacement::sets ? ways_.size() : lru_.size();
  if (dirty_order_.size() > 2 * most_lines + 64)
    std::erase_if(dirty_order_, [&](const DirtyEntry& e) { return !still_dirty(e); });
  dirty_order_.push_back({key, line, stamp});
  return stamp;
}

bool L2Cache::still_dirty(const DirtyEntry& e) const {
  if (replacement_ == L2Replacement::sets) {
    const Way* way = find_line(e.key, e.line);
    return way != nullptr && way->dirty && way->dirtied == e.stamp;
  }
  const auto it = where_.find(e.key);
  return it != where_.end() && it->second->dirty && it->second->dirtied == e.stamp;
}

void L2Cache::write_back_past_cap(std::vector<TensorTraffic>& tensors) {
  if (dirty_cap_ == 0) return;
  while (dirty_bytes_ > dirty_cap_) {
    if (dirty_order_.empty())
      throw std::logic_error("the L2 counts dirty bytes that no dirty line holds");
    const DirtyEntry oldest = dirty_order_.front();
    dirty_order_.pop_front();
    if (!still_dirty(oldest)) continue;
    // Written back and kept: the line stays where it is in its LRU order, clean.
    int tensor = 0;
    Bytes bytes = 0;
    if (replacement_ == L2Replacement::sets) {
      Way* way = find_way(oldest.key, oldest.line);
      way->dirty = false;
      tensor = way->tensor;
      bytes = way->bytes;
    } else {
      Line& line = *where_.at(oldest.key);
      line.dirty = false;
      tensor = line.tensor;
      bytes = line.bytes;
      tell(L2EventKind::clean, tensor, line.row0, bytes, /*write=*/true);
    }
    tensors[tensor].dram_written += bytes;
    dirty_bytes_ -= bytes;
  }
}

std::list<L2Cache::Line>::iterator L2Cache::victim() {
  if (replacement_ == L2Replacement::lru) return std::prev(lru_.end());
  // Any resident tile, each as likely: a 64-bit word from Philox, scaled to the count.
  const cpu::PhiloxCounter word = cpu::philox4x32_10(
      {static_cast<std::uint32_t>(evictions_), static_cast<std::uint32_t>(evictions_ >> 32),
       static_cast<std::uint32_t>(partition_), 0},
      cpu::philox_key(seed_));
  const std::uint64_t r = (std::uint64_t{word[0]} << 32) | word[1];
  return resident_[static_cast<std::size_t>(
      (static_cast<unsigned __int128>(r) * resident_.size()) >> 64)];
}

void L2Cache::drop(std::list<Line>::iterator line) {
  in_use_ -= line->bytes;
  if (line->dirty) dirty_bytes_ -= line->bytes;
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
  for (Way& way : ways_) {
    if (way.tensor >= 0 && way.dirty) tensors[way.tensor].dram_written += way.bytes;
    way.dirty = false;
  }
  for (Line& line : lru_) {
    if (line.dirty) tensors[line.tensor].dram_written += line.bytes;
    line.dirty = false;
  }
  dirty_bytes_ = 0;
  dirty_order_.clear();
}

void L2Cache::clear() {
  ways_.assign(ways_.size(), Way{});
  tags_.assign(tags_.size(), 0);
  used_.assign(used_.size(), 0);
  lru_.clear();
  resident_.clear();
  where_.clear();
  in_use_ = 0;
  dirty_bytes_ = 0;
  dirty_order_.clear();
}

bool L2Cache::holds(int tensor, std::int64_t row0) const {
  if (replacement_ == L2Replacement::sets) return find_line(key_of(tensor, row0), 0) != nullptr;
  return where_.contains(key_of(tensor, row0));
}

void L2Cache::add_dirty(std::vector<Bytes>& dirty) const {
  for (const Way& way : ways_)
    if (way.tensor >= 0 && way.dirty) dirty[way.tensor] += way.bytes;
  for (const Line& line : lru_)
    if (line.dirty) dirty[line.tensor] += line.bytes;
}

std::vector<std::int64_t> L2Cache::signature(const std::vector<int>& moving,
                                             std::int64_t origin) const {
  if (replacement_ == L2Replacement::sets || dirty_cap_ > 0)  // never the same twice
    return {-1, static_cast<std::int64_t>(++signatures_)};
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
  if (replacement_ == L2Replacement::sets || dirty_cap_ > 0)
    throw std::logic_error("an L2 of hashed sets, or with a dirty cap, cannot be shifted: its "
                           "signatures never repeat");
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

namespace flashlab::sim {

int l2_line_home(int tensor, std::int64_t row0, std::int64_t line, std::uint64_t seed,
                 int partitions) {
  if (partitions < 1) throw std::logic_error("an L2 of at least one partition");
  return detail::home_by_key(detail::key_of(tensor, row0), line, seed, partitions);
}

bool l2_line_homed_here(int tensor, std::int64_t row0, std::int64_t line, std::uint64_t seed,
                        int partitions) {
  return l2_line_home(tensor, row0, line, seed, partitions) == 0;
}

}  // namespace flashlab::sim

// An L2 between HBM and SRAM: least-recently-used tiles (or a random victim, or 128-byte
// lines in hashed sets with LRU in each: l2_policy.hpp), write-back and write-allocate, with
// an optional cap on the bytes it holds dirty (past it, the oldest dirty lines are written
// back and stay, clean). It turns the SRAM's traffic (what the two-level model counts) into
// the traffic that reaches HBM itself (what a GPU's DRAM counters report). Private to
// simulator/.
//
// The programs (simulate.hpp) run one tile after another through it, as one SM would; the
// grid model (grid.hpp) runs a kernel's resident blocks together through one of it, as the
// SMs of a GPU share theirs.
#pragma once

#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/l2_policy.hpp"
#include "flashlab/sim/machine.hpp"

#include <cstdint>
#include <algorithm>
#include <deque>
#include <functional>
#include <list>
#include <unordered_map>
#include <vector>

namespace flashlab::sim::detail {

class L2Cache {
 public:
  // partition: the number its events carry (grid.hpp's L2 partitions; 0 for the one L2).
  // replacement: which tile makes room (l2_policy.hpp); random draws from Philox4x32-10
  // keyed by seed, its counter the partition and the evictions so far; sets hashes each line
  // to its set with the seed (and the partition) mixed in.
  // home_partitions > 1 (sets only): this L2 stands for that many partitions alike
  // (Problem::l2_home_partitions): a line it reads from DRAM, or writes, whose home is
  // another partition than its reader's (by hash) is placed twice, itself and its home copy;
  // a read that misses finds the home copy without DRAM (a far hit) while it lasts. Home
  // copies are clean: the line's own copy writes it back.
  // dirty_cap > 0: the most bytes this L2 holds dirty (HardwareProfile::l2_dirty_cap). A
  // write that takes the dirty bytes past it writes the oldest dirty lines back to DRAM, in
  // the order they became dirty (a line written again while dirty keeps its place), until
  // they are within it; those lines stay resident, clean. 0: no cap, a dirty line stays
  // dirty until it is evicted or flushed. Throws cpu::InvalidArgument unless
  // 0 <= dirty_cap <= capacity.
  // `ways`: the lines of a set (sets policy only; kL2Ways unless a hardware profile says).
  // `reduced_window`: reduced lines kept among a set's that many least recently used (sets
  // only; l2_policy.hpp's check_l2_reduced_window says the rule and what it refuses). 1: plain
  // LRU.
  explicit L2Cache(Bytes capacity, int partition = 0,
                   L2Replacement replacement = L2Replacement::lru, std::uint64_t seed = 0,
                   int home_partitions = 1, Bytes dirty_cap = 0, int ways = kL2Ways,
                   int reduced_window = 1);

  // A tile of a tensor, rows from row0 on, `bytes` long, moving between the L2 and SRAM.
  // Tiles are the units the programs move, and each program cuts a tensor into the same
  // tiles every time (K by Bc, Q and O by Br, S whole), so a tile is known by its first
  // row; a read of a resident tile's leading part (the visible scores of a causal row) hits
  // it. A read that misses fetches the tile from HBM; a write allocates it without
  // fetching (it is written whole) and marks it dirty. Tiles larger than the whole L2 go
  // straight to HBM. Evicted dirty tiles are written back, and so are the oldest dirty ones
  // past the dirty cap (which stay, clean). What reaches HBM is booked in tensors[t].dram_read
  // and .dram_written. times > 1: the same tile again and again; after
  // the first access it is resident, so the rest hit, unless it is larger than the L2.
  void access(int tensor, std::int64_t row0, Bytes bytes, bool write,
              std::vector<TensorTraffic>& tensors, std::int64_t times = 1);
  // A reduction into a tile (an atomic add the L2 performs): read where absent, then written,
  // as access() read then wrote it; under the sets policy its lines are marked reduced into
  // (the victim rule of reduced_window).
  void reduce(int tensor, std::int64_t row0, Bytes bytes, std::vector<TensorTraffic>& tensors);

  // A read of a tile that this L2 does not hold but another partition does: placed here,
  // clean, copied from there without a DRAM read (L2EventKind::copy). The caller has
  // checked that it is not resident here and that it fits. With sets, "held" is judged by
  // the tile's first line (holds), and every line of it is copied: the other partition's
  // lost lines, if any, are taken as held (a simplification of the sets policy's grid).
  void copy_in(int tensor, std::int64_t row0, Bytes bytes, std::vector<TensorTraffic>& tensors);

  // The sets policy, line by line (the grid model's home copies, grid.hpp): a read of the
  // tile whose every line comes from this partition if it holds it, else, where
  // held_far(j) says another partition holds line j, is copied from there (no DRAM read),
  // else from DRAM. Returns the lines read from DRAM, the ones whose home copies the caller
  // places (place_home_copy). Tells one event: miss if a line came from DRAM, copy if one
  // came from another partition, else hit.
  using HeldFar = std::function<bool(std::int64_t line)>;
  std::vector<std::int64_t> read_lines(int tensor, std::int64_t row0, Bytes bytes,
                                       const HeldFar& held_far,
                                       std::vector<TensorTraffic>& tensors);
  // Whether line `line` of the tile is resident (sets only; false for the other policies).
  bool holds_line(int tensor, std::int64_t row0, std::int64_t line) const;
  // Line `line` of the tile (bytes: the tile's), placed here clean without a DRAM read, or
  // touched if here: the home copy of a line that another partition read from DRAM or wrote.
  void place_home_copy(int tensor, std::int64_t row0, std::int64_t line, Bytes bytes,
                       std::vector<TensorTraffic>& tensors);

  // Whether the tile of that tensor starting at row0 is resident (sets: its first line).
  bool holds(int tensor, std::int64_t row0) const;
  Bytes capacity() const { return capacity_; }
  // The bytes held dirty now (never above the dirty cap, where there is one).
  Bytes dirty_bytes() const { return dirty_bytes_; }

  // Writes every dirty tile back: where the data ends up when the program is done.
  void flush(std::vector<TensorTraffic>& tensors);
  // Drops every tile, dirty or not, booking nothing: an L2 emptied by someone else (Nsight
  // Compute between the kernels it measures, which writes the dirty ones back itself).
  void clear();
  // The bytes of each tensor still dirty, without writing them back (dirty[t] += ...).
  void add_dirty(std::vector<Bytes>& dirty) const;

  // Told of every hit, miss, allocation, eviction and write-back from now on (null: none).
  void set_observer(const L2Observer* observer) { observer_ = observer; }

  // Machine::l2_signature and Machine::shift_l2. With sets no two signatures are equal (the
  // lines' sets depend on their rows, so a shifted L2 is not the same L2): nothing is skipped.
  // Nor with a dirty cap, whose order of dirty lines the signature does not record.
  std::vector<std::int64_t> signature(const std::vector<int>& moving, std::int64_t origin) const;
  void shift(const std::vector<int>& moving, std::int64_t rows);

 private:
  struct Line {
    std::uint64_t key;
    int tensor;
    std::int64_t row0;
    Bytes bytes;
    bool dirty;
    std::size_t slot;          // its place in resident_
    std::uint64_t dirtied = 0;  // when it last became dirty: its place in dirty_order_
  };
  void evict_until_fits(Bytes bytes, std::vector<TensorTraffic>& tensors);
  // The sets policy: a line j of a tile, its set, and one access to it.
  // 32 bytes, so that the half million ways of a 60 MiB L2 take as little of the host's
  // caches as they can (the model's time is its lookups' misses there).
  struct Way {
    std::uint64_t key = 0;      // the tile's
    std::uint64_t dirtied = 0;  // when it last became dirty: its place in dirty_order_
    std::int32_t line = 0;      // which of its lines (a tile has fewer than 2^31)
    std::int32_t tensor = -1;   // -1: empty
    std::int32_t bytes = 0;     // at most kL2LineBytes
    bool dirty = false;
    bool reduced = false;  // reduced into (reduce()) since it was placed
  };
  static_assert(sizeof(Way) == 32);
  static Way way_of(std::uint64_t key, std::int64_t line, int tensor, Bytes bytes, bool dirty) {
    return {.key = key,
            .line = static_cast<std::int32_t>(line),
            .tensor = tensor,
            .bytes = static_cast<std::int32_t>(bytes),
            .dirty = dirty};
  }
  void access_lines(int tensor, std::int64_t row0, Bytes bytes, bool write,
                    std::vector<TensorTraffic>& tensors, std::int64_t times);
  // Touches line j (bytes long) of the tile; returns whether it was resident. A miss places
  // it (evicting the set's least recently used line), reading it from DRAM when `fetch`.
  bool touch_line(int tensor, std::int64_t row0, std::int64_t j, Bytes bytes, bool write,
                  bool fetch, std::vector<TensorTraffic>& tensors);
  // Places `way` (a line, its key a tile's or a home copy's) in its set, making room by LRU;
  // a dirty line it drops is written back.
  void place_way(const Way& w, std::vector<TensorTraffic>& tensors);
  bool homed_here(std::uint64_t key, std::int64_t line) const;
  std::size_t set_of(std::uint64_t key, std::int64_t line) const;
  const Way* find_line(std::uint64_t key, std::int64_t line) const;
  Way* find_way(std::uint64_t key, std::int64_t line);
  std::list<Line>::iterator victim();
  void drop(std::list<Line>::iterator line);
  void place(int tensor, std::int64_t row0, Bytes bytes, bool dirty);
  // The dirty cap. A line (a tile's key and line, 0 for a whole tile) that has just become
  // dirty joins the back of dirty_order_, stamped; an entry whose line has since gone, or
  // been cleaned, or become dirty again later, no longer matches its line's stamp and is
  // passed over.
  struct DirtyEntry {
    std::uint64_t key;
    std::int64_t line;
    std::uint64_t stamp;
  };
  std::uint64_t became_dirty(std::uint64_t key, std::int64_t line, Bytes bytes);
  bool still_dirty(const DirtyEntry& entry) const;
  // Writes the oldest dirty lines back, keeping them resident and clean, until the dirty
  // bytes are within the cap (nothing where there is no cap).
  void write_back_past_cap(std::vector<TensorTraffic>& tensors);
  void tell(L2EventKind kind, int tensor, std::int64_t row0, Bytes bytes, bool write) const {
    if (observer_) (*observer_)({kind, tensor, row0, bytes, write, partition_});
  }

  Bytes capacity_, in_use_ = 0;
  int partition_;
  L2Replacement replacement_;
  std::uint64_t seed_;
  std::uint64_t evictions_ = 0;
  int home_partitions_;
  std::list<Line> lru_;                              // front: most recently used
  std::vector<std::list<Line>::iterator> resident_;  // every line, in no order: random draws
  std::unordered_map<std::uint64_t, std::list<Line>::iterator> where_;
  const L2Observer* observer_ = nullptr;
  std::size_t set_ways_;   // sets policy: the lines of a set, W
  std::size_t sets_ = 0;   // sets policy: S sets of W ways
  std::vector<Way> ways_;  // set s is ways_[s W .. (s + 1) W)
  // Beside each way, a 32-bit tag of its (key, line) (tag_of): a lookup scans a set's W tags
  // (16 of them are one cache line of the host's) and reads a way only where its tag matches
  // (with the stamps below, 0.86 of the time the backward's main kernel at 16 heads, N = 8,192
  // took without). A filter for speed: the way's own fields decide (an empty way's tag is 0,
  // which a line's may also be).
  std::vector<std::uint32_t> tags_;
  // Beside each way too, when it was last touched (the set's LRU order; 0: empty), so that
  // finding a victim reads the set's W stamps and not its ways.
  std::vector<std::uint64_t> used_;
  std::size_t reduced_window_;  // sets: see the constructor
  bool reducing_ = false;       // within reduce(): the lines it touches are marked reduced
  // The way that makes room in the set whose first way is `first` (none empty): the least
  // recently used, or under reduced_window_ the one its rule picks.
  std::size_t victim_way(std::size_t first) const;
  std::size_t index_of(const Way* way) const { return std::size_t(way - ways_.data()); }
  static std::uint32_t tag_of(std::uint64_t key, std::int64_t line) {
    return static_cast<std::uint32_t>(
        (key ^ (static_cast<std::uint64_t>(line) * 0x9E3779B97F4A7C15ull)) >> 32);
  }
  std::uint64_t clock_ = 0;               // line touches so far
  Bytes dirty_cap_;                       // 0: no cap
  Bytes dirty_bytes_ = 0;                 // held dirty now
  std::uint64_t dirtied_ = 0;             // lines that became dirty so far: the stamps
  std::deque<DirtyEntry> dirty_order_;    // with a cap: oldest dirty first, and stale entries
  mutable std::uint64_t signatures_ = 0;  // signatures given: each one differs
};

}  // namespace flashlab::sim::detail

// Home copies in the grid model (GridProblem::l2_home_copies, grid.hpp "Home copies"): reads go
// line by line (each line from the block's partition, else copied from another that holds it,
// else from DRAM), and a line read from DRAM, or written, is held at its home partition too.
// Worked by hand on a grid whose blocks all run in one partition, then against a small
// reference of the rule replayed on the model's own accesses over random small grids.
#include "grid_events.hpp"
#include "helpers.hpp"

#include "flashlab/cpu/types.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/l2_policy.hpp"
#include "flashlab/sim/profiles.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace flashlab::sim::test {

namespace {

using cpu::Index;
constexpr Bytes kLine = kL2LineBytes;
constexpr Bytes kOneSet = kL2Ways * kLine;  // a partition of one set: LRU over 16 lines

// The rule in a few lines, for partitions of one set each: a line is (tensor, row0, j), LRU
// by its last touch. Replays the model's accesses as its observer reports them.
struct Reference {
  struct Way {
    int tensor;
    Index row0, j;
    Bytes bytes;
    bool dirty;
    std::uint64_t used;
  };
  Reference(int partitions, Bytes partition_bytes, std::uint64_t seed)
      : parts(static_cast<std::size_t>(partitions)), capacity(partition_bytes), seed(seed) {}
  std::vector<std::vector<Way>> parts;
  Bytes capacity;
  std::uint64_t seed, clock = 0;
  Bytes read = 0, written = 0;

  Way* find(int part, int tensor, Index row0, Index j) {
    for (Way& w : parts[std::size_t(part)])
      if (w.tensor == tensor && w.row0 == row0 && w.j == j) return &w;
    return nullptr;
  }
  // Touches the line, placing it (clean or dirty) if absent; a dirty victim is written back.
  void touch(int part, int tensor, Index row0, Index j, Bytes bytes, bool write) {
    if (Way* w = find(part, tensor, row0, j)) {
      w->used = ++clock;
      w->dirty = w->dirty || write;
      w->bytes = std::max(w->bytes, bytes);
      return;
    }
    std::vector<Way>& set = parts[std::size_t(part)];
    const Way fresh{tensor, row0, j, bytes, write, ++clock};
    if (int(set.size()) < kL2Ways) return set.push_back(fresh);
    Way& victim = *std::min_element(set.begin(), set.end(),
                                    [](const Way& a, const Way& b) { return a.used < b.used; });
    if (victim.dirty) written += victim.bytes;
    victim = fresh;
  }
  bool held_elsewhere(int part, int tensor, Index row0, Index j) {
    for (int o = 0; o < int(parts.size()); ++o)
      if (o != part && find(o, tensor, row0, j)) return true;
    return false;
  }
  void access(const L2Event& e) {
    if (e.kind == L2EventKind::bypass) {
      (e.write ? written : read) += e.bytes;
      return;
    }
    REQUIRE(e.bytes <= capacity);
    std::vector<Index> fresh;  // lines read from DRAM or written
    for (Index j = 0; j * kLine < e.bytes; ++j) {
      const Bytes bytes = std::min(kLine, e.bytes - j * kLine);
      if (e.write) {
        touch(e.partition, e.tensor, e.row0, j, bytes, true);
        fresh.push_back(j);
        continue;
      }
      if (find(e.partition, e.tensor, e.row0, j)) {
        touch(e.partition, e.tensor, e.row0, j, bytes, false);
        continue;
      }
      if (!held_elsewhere(e.partition, e.tensor, e.row0, j)) {
        read += bytes;
        fresh.push_back(j);
      }
      touch(e.partition, e.tensor, e.row0, j, bytes, false);
    }
    for (const Index j : fresh) {
      const int home = l2_line_home(e.tensor, e.row0, j, seed, int(parts.size()));
      if (home != e.partition)
        touch(home, e.tensor, e.row0, j, std::min(kLine, e.bytes - j * kLine), false);
    }
  }
  Bytes dirty() const {
    Bytes sum = 0;
    for (const auto& set : parts)
      for (const Way& w : set) sum += w.dirty ? w.bytes : 0;
    return sum;
  }
};

}  // namespace

// One head, N = 8, d = 64 in bf16 (a row is one 128-byte line), Br = Bc = 4: two blocks, one
// after the other on the one SM, whose partition is 0; partition 1 has no block. Each
// partition is one set of 16 lines. Block 0 touches, in order, Q_0, K_0, V_0, K_1, V_1 (4
// lines each), then writes O_0 (4) and L_0 (one sector); block 1 reads Q_1 (4). Of those 29
// lines partition 0 keeps the last 16 (K_1's last 3, V_1, O_0, L_0, Q_1), and block 1's
// reads of K_0 and V_0 push out K_1's and V_1's rest: block 1 misses all 16 lines of K and V
// in its partition. Without home copies nothing else holds them: 16 lines from DRAM again.
// With them, partition 1 holds, clean, every line homed there that partition 0 read from DRAM
// or wrote; so block 1 copies those of K and V from there and reads only the lines homed at
// 0 from DRAM again. (The seed is one whose lines homed at 1, of the 29 placed before block 1
// reads K, fit partition 1's 16 ways, so that none is lost there.)
TEST_CASE("grid homes: blocks in one partition re-read K and V from the other's home copies") {
  GridProblem p{.N = 8, .d = 64, .dtype = DType::bf16, .heads = 1, .Br = 4, .Bc = 4,
                .blocks_per_sm = 1, .sm_count = 1, .l2_bytes = 2 * kOneSet, .l2_partitions = 2,
                .replacement = L2Replacement::sets, .l2_home_copies = true};
  p.slot_partitions = {0};
  const auto homed_at_1 = [&](int tensor, Index row0, Index lines) {
    Index n = 0;
    for (Index j = 0; j < lines; ++j) n += l2_line_home(tensor, row0, j, p.seed, 2) == 1;
    return n;
  };
  const auto kv_homed_at_1 = [&] {
    return homed_at_1(kK, 0, 4) + homed_at_1(kK, 4, 4) + homed_at_1(kV, 0, 4) +
           homed_at_1(kV, 4, 4);
  };
  const auto placed_at_1 = [&] {  // the 29 lines before block 1's K_0
    return kv_homed_at_1() + homed_at_1(kQ, 0, 4) + homed_at_1(kQ, 4, 4) +
           homed_at_1(kO, 0, 4) + homed_at_1(kL, 0, 1);
  };
  while (placed_at_1() > kL2Ways) ++p.seed;
  CAPTURE(p.seed);
  const Index k1 = kv_homed_at_1();
  REQUIRE(k1 > 0);
  REQUIRE(k1 < 16);
  const GridReport homes = run_grid(p);
  CHECK(homes.tensor("Q").dram_read == 8 * kLine);
  CHECK(homes.tensor("K").dram_read + homes.tensor("V").dram_read == (16 + 16 - k1) * kLine);
  // Home copies are clean: O and L reach DRAM once, during the kernel or at its end (L_0 and
  // L_1 share one 32-byte sector, which each of them counts: grid.hpp).
  CHECK(homes.dram_written() + homes.left_dirty() == 8 * kLine + 2 * kSectorBytes);
  p.l2_home_copies = false;
  const GridReport none = run_grid(p);
  CHECK(none.tensor("K").dram_read + none.tensor("V").dram_read == 32 * kLine);
  CHECK(none.tensor("Q").dram_read == 8 * kLine);
}

TEST_CASE("grid homes: random small grids against the rule's reference, event by event") {
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    GridProblem p = random_small_grid(rng, {1, 5, 31, 64, 97});
    p.replacement = L2Replacement::sets;
    p.l2_home_copies = true;
    p.seed = std::uint64_t(pick(rng));
    // Partitions of one set each (up to 2 sets' bytes: still one set of 16 ways).
    const Bytes part_bytes = kOneSet + pick(rng) % kOneSet;
    p.l2_bytes = part_bytes * p.l2_partitions;
    if (pick(rng) % 2) {  // the drift schedule: accesses in another order
      p.schedule = GridSchedule::drift;
      p.block_time_spread = 0.2;
    }
    if (pick(rng) % 2 && p.sm_count >= p.l2_partitions)  // blocks placed by a map
      p.slot_partitions = scattered_partitions(p.sm_count, p.l2_partitions, p.seed);
    CAPTURE(p.N);
    CAPTURE(p.l2_partitions);
    Reference ref(int(p.l2_partitions), p.partition_bytes(), p.seed);
    const GridReport r = run_grid(p, [&](const L2Event& e) { ref.access(e); });
    CHECK(r.dram_read() == ref.read);
    CHECK(r.dram_written() == ref.written);
    CHECK(r.left_dirty() == ref.dirty());
  }
}

TEST_CASE("grid homes: the H200 grid takes them, and an L2 without hashed sets refuses them") {
  const GridProblem h200 = on_gpu(find_profile("h200"), {.blocks_per_sm = 2});
  CHECK(h200.l2_home_copies == find_profile("h200").l2_home_copies);
  CHECK(h200.l2_home_copies);
  for (const L2Replacement r : {L2Replacement::lru, L2Replacement::random}) {
    GridProblem p = h200;
    p.replacement = r;
    CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("give replacement sets, or no home copies"),
                         cpu::InvalidArgument);
    p.l2_home_copies = false;
    CHECK_NOTHROW(check(p));
  }
}

}  // namespace flashlab::sim::test

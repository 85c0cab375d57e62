// The grid model's drift schedule and random replacement (flashlab/sim/grid.hpp): a grid of
// 2 SMs worked by hand where one block trailing the other re-reads K and V, sigma = 0 as the
// lockstep schedule access for access, the same seed giving the same bytes, random victims
// keeping part of a stream larger than the L2 where LRU keeps none, and the parameters
// refused out of range.
#include "grid_events.hpp"
#include "helpers.hpp"

#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/profiles.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace flashlab::sim::test {

namespace {

// 2 SMs, one block each, one head of N = 16: query tiles of 8 rows (blocks 0 and 1, both
// resident from the start), K/V tiles of 4 rows (Tc = 4). d = 16 in bf16: a row is 32 bytes,
// a Q or O tile 256 bytes, a K or V tile 128, an L tile (8 fp32) 32. The L2 holds 512 bytes:
// two K/V steps.
GridProblem two_blocks() {
  return {.N = 16,
          .d = 16,
          .heads = 1,
          .Br = 8,
          .Bc = 4,
          .blocks_per_sm = 1,
          .sm_count = 2,
          .l2_bytes = 512};
}

GridProblem drifting(GridProblem p, double sigma, std::uint64_t seed) {
  p.schedule = GridSchedule::drift;
  p.block_time_spread = sigma;
  p.seed = seed;
  return p;
}

void check_same_counts(const GridReport& a, const GridReport& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t t = 0; t < a.tensors.size(); ++t) {
    CAPTURE(t);
    CHECK(a.tensors[t].read == b.tensors[t].read);
    CHECK(a.tensors[t].written == b.tensors[t].written);
    CHECK(a.tensors[t].dram_read == b.tensors[t].dram_read);
    CHECK(a.tensors[t].dram_written == b.tensors[t].dram_written);
    CHECK(a.dirty_at_end[t] == b.dirty_at_end[t]);
  }
}

}  // namespace

TEST_CASE("grid drift: a block trailing by more than the L2 holds re-reads K and V, by hand") {
  // Seed 2 draws tau_0 = 0.27 and tau_1 = 1.31 tile times (sigma = 1): block 1 takes more than
  // 4 of block 0's steps for each of its own, so block 0 finishes before block 1 reaches K_1.
  const GridProblem p = drifting(two_blocks(), 1.0, 2);
  const double tau0 = block_tile_time(p, 0), tau1 = block_tile_time(p, 1);
  CAPTURE(tau0);
  CAPTURE(tau1);
  REQUIRE(tau1 > 4 * tau0);
  const std::vector<std::string> expected = {
      // t = 0: both blocks load Q (the L2 is full), then K_0 and V_0: block 0 misses, 1 hits
      "miss Q 0 256", "miss Q 8 256", "evict Q 0 256", "miss K 0 128", "miss V 0 128",
      "hit K 0 128", "hit V 0 128",
      // t = tau_0 .. 3 tau_0: block 0 alone through K_1 .. K_3; the L2 keeps its last two steps
      "evict Q 8 256", "miss K 4 128", "miss V 4 128", "evict K 0 128", "miss K 8 128",
      "evict V 0 128", "miss V 8 128", "evict K 4 128", "miss K 12 128", "evict V 4 128",
      "miss V 12 128",
      // t = 4 tau_0: block 0 stores O_0 and L_0
      "evict K 8 128", "evict V 8 128", "allocate O 0 256", "evict K 12 128", "allocate L 0 32",
      // t = tau_1: block 1 wants K_1, long gone: a miss, and O_0 is written back to make room
      "evict V 12 128", "miss K 4 128", "write-back O 0 256", "miss V 4 128",
      // t = 2 tau_1, 3 tau_1: K_2, V_2, K_3, V_3 again from DRAM
      "miss K 8 128", "write-back L 0 32", "miss V 8 128", "evict K 4 128", "miss K 12 128",
      "evict V 4 128", "miss V 12 128",
      // t = 4 tau_1: block 1 stores O_1 and L_1
      "evict K 8 128", "evict V 8 128", "allocate O 8 256", "evict K 12 128", "allocate L 8 32"};
  CHECK(events_of(p) == expected);

  const GridReport drift = run_grid(p);
  const GridReport lockstep = run_grid(two_blocks());
  // Lockstep: block 1 hits every tile block 0 brought in; K and V once each from DRAM.
  CHECK(lockstep.tensor("K").dram_read == 4 * 128);
  CHECK(lockstep.tensor("V").dram_read == 4 * 128);
  // Drift: block 1 hits only K_0 and V_0 (t = 0) and reads K_1 .. K_3, V_1 .. V_3 again.
  CHECK(drift.tensor("K").dram_read == (4 + 3) * 128);
  CHECK(drift.tensor("V").dram_read == (4 + 3) * 128);
  CHECK(drift.tensor("K").read == lockstep.tensor("K").read);  // the SMs load the same tiles
  CHECK(drift.tensor("O").dram_written == 256);                // O_0 and L_0 pushed out
  CHECK(drift.tensor("L").dram_written == 32);
  CHECK(drift.steps == static_cast<std::int64_t>(std::ceil(4 * tau1)));
}

TEST_CASE("grid drift: a lag the L2 covers changes no count") {
  // Seed 4 draws tau_0 = 0.613 and tau_1 = 0.627: block 1 loses 0.014 of a step per step, so
  // it reaches K_j before block 0 reaches K_(j+1) for every j < 4: the lockstep order of
  // accesses, and so its counts.
  const GridProblem p = drifting(two_blocks(), 1.0, 4);
  const double tau0 = block_tile_time(p, 0), tau1 = block_tile_time(p, 1);
  CAPTURE(tau0);
  CAPTURE(tau1);
  REQUIRE(tau1 > tau0);
  REQUIRE(3 * tau1 < 4 * tau0);
  check_same_counts(run_grid(p), run_grid(two_blocks()));
  CHECK(events_of(p) == events_of(two_blocks()));
  CHECK(run_grid(p).steps == static_cast<std::int64_t>(std::ceil(4 * tau1)));  // 3, not 4
}

TEST_CASE("grid drift: sigma = 0 is the lockstep schedule, access for access") {
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 30; ++trial) {
    const GridProblem lock = random_small_grid(rng, {1, 17, 97, 113, 1023});
    const Index N = lock.N;
    const GridProblem drift = drifting(lock, 0.0, pick(rng));
    CAPTURE(N);
    CAPTURE(lock.heads);
    CAPTURE(lock.kv_heads);
    CAPTURE(lock.Br);
    CAPTURE(lock.Bc);
    CAPTURE(lock.sm_count);
    CAPTURE(lock.l2_bytes);
    CAPTURE(lock.l2_partitions);
    CAPTURE(lock.causal);
    check_same_counts(run_grid(drift), run_grid(lock));
    CHECK(run_grid(drift).steps == run_grid(lock).steps);
    CHECK(events_of(drift) == events_of(lock));
  }
}

TEST_CASE("grid drift: the same seed gives the same bytes, another seed other bytes") {
  // 4 heads of N = 1023 on 8 SMs: 32 blocks of Tc = 16 steps, 16 resident; the L2 holds
  // four K/V steps of one partition, so how far blocks drift apart decides the re-reads.
  GridProblem p{.N = 1023,
                .d = 32,
                .heads = 4,
                .Br = 128,
                .Bc = 64,
                .blocks_per_sm = 2,
                .sm_count = 8,
                .l2_bytes = 2 * 4 * 2 * 64 * 32 * 2,
                .l2_partitions = 2};
  const GridReport a = run_grid(drifting(p, 0.3, 7)), b = run_grid(drifting(p, 0.3, 7));
  check_same_counts(a, b);
  std::vector<Bytes> reads;
  for (std::uint64_t seed = 0; seed < 8; ++seed)
    reads.push_back(run_grid(drifting(p, 0.3, seed)).dram_read());
  CHECK(std::count(reads.begin(), reads.end(), reads.front()) < std::ssize(reads));
  // Whatever the drift, K and V come from DRAM at least once and the SMs load the same bytes.
  const GridReport lock = run_grid(p);
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    const GridReport r = run_grid(drifting(p, 0.3, seed));
    CHECK(r.sm_read() == lock.sm_read());
    CHECK(r.tensor("K").dram_read >= Bytes{4} * 1023 * 32 * 2);
  }
}

TEST_CASE("grid drift: random victims keep part of a stream larger than the L2, LRU none") {
  // One SM, one block at a time, one head of N = 64: block 0 streams K_0, V_0 .. K_63, V_63
  // (Bc = 1: 128 tiles of 32 bytes, 4 KiB), then block 1 streams them again. The L2 holds
  // 3 KiB. LRU has always just evicted the tile wanted next, so block 1 misses all 128; a
  // random victim leaves some of them in place.
  const GridProblem lru{.N = 64,
                        .d = 16,
                        .heads = 1,
                        .Br = 32,
                        .Bc = 1,
                        .blocks_per_sm = 1,
                        .sm_count = 1,
                        .l2_bytes = 3 * 1024};
  const Bytes kv_once = 2 * 64 * 16 * 2;
  const GridReport by_lru = run_grid(lru);
  CHECK(by_lru.tensor("K").dram_read + by_lru.tensor("V").dram_read == 2 * kv_once);
  int kept_some = 0;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    GridProblem p = lru;
    p.replacement = L2Replacement::random;
    p.seed = seed;
    const GridReport r = run_grid(p);
    const Bytes kv = r.tensor("K").dram_read + r.tensor("V").dram_read;
    CHECK(kv >= kv_once);
    CHECK(kv <= 2 * kv_once);
    kept_some += kv < 2 * kv_once;
    check_same_counts(r, run_grid(p));  // the same seed, the same victims
  }
  CHECK(kept_some > 0);
}

TEST_CASE("grid drift: random victims, grouped or block by block, give the same counts") {
  // The lockstep schedule books blocks that run alike as one access; a hit changes nothing a
  // random victim depends on, so the victims and the counts must come out the same.
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 30; ++trial) {
    GridProblem p = random_small_grid(rng, {1, 17, 97, 113, 1023});
    p.replacement = L2Replacement::random;
    p.seed = static_cast<std::uint64_t>(pick(rng));
    const Index N = p.N;
    CAPTURE(N);
    CAPTURE(p.heads);
    CAPTURE(p.kv_heads);
    CAPTURE(p.Br);
    CAPTURE(p.Bc);
    CAPTURE(p.sm_count);
    CAPTURE(p.l2_bytes);
    CAPTURE(p.l2_partitions);
    CAPTURE(p.seed);
    check_same_counts(run_grid(p), run_grid(p, [](const L2Event&) {}));
  }
}

TEST_CASE("grid drift: the spread and the schedule refused out of range, with what is right") {
  const auto refuses = [](GridProblem p, const char* words) {
    CAPTURE(words);
    CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains(words), cpu::InvalidArgument);
  };
  refuses(drifting({}, -0.1, 0), "block_time_spread = -0.1: give 0 to 1");
  refuses(drifting({}, 1.5, 0), "block_time_spread = 1.5: give 0 to 1");
  refuses(drifting({}, std::numeric_limits<double>::quiet_NaN(), 0), "block_time_spread = nan");
  refuses(drifting({}, std::numeric_limits<double>::infinity(), 0), "block_time_spread = inf");
  refuses({.block_time_spread = 0.1}, "with the lockstep schedule");
  refuses({.schedule = static_cast<GridSchedule>(9)},
          "give lockstep, drift, older_first, logged or catch_up");
  refuses({.replacement = static_cast<L2Replacement>(9)}, "give lru, random or sets");
  // Every profile's figure is one the model takes.
  for (const HardwareProfile& h : profiles()) {
    CAPTURE(h.name);
    CHECK_NOTHROW(check(drifting({.l2_partitions = h.l2_partitions}, h.block_time_spread, 0)));
  }
}

namespace {

// The K tiles loaded, in the order the L2 sees them (V follows each K): a tile's index j.
std::vector<Index> k_order(const GridProblem& p) {
  std::vector<Index> out;
  run_grid(p, [&](const L2Event& e) {
    if (e.tensor == kK) out.push_back(e.row0 / p.Bc);
  });
  return out;
}

// One SM with two slots, one head of N = 32 in query tiles of 8 (4 blocks) and KV tiles of 8
// (Tc = 4), an L2 that holds everything.
GridProblem one_sm_two_slots() {
  return {.N = 32, .d = 16, .heads = 1, .Br = 8, .Bc = 8, .blocks_per_sm = 2, .sm_count = 1,
          .l2_bytes = 1 << 20, .schedule = GridSchedule::older_first};
}

}  // namespace

TEST_CASE("grid older first: the older block on an SM runs ahead, worked by hand") {
  // Lead 0.5: paces 1.25 (a KV tile in 0.8) and 0.75 (in 4/3). Blocks 0 and 1 start at 0,
  // block 0 the older: its K_j at 0, 0.8, 1.6, 2.4, its end at 3.2; block 1's at 0, 1.333,
  // 2.667. At 3.2 block 2 takes block 0's slot, and block 1, now the older, stands at 2.4
  // tiles: K_3 at 3.68, its end at 4.48. Block 2 (K_0 at 3.2) stands at 0.96 tiles then:
  // K_1 at 4.512, K_2 at 5.312; block 3 starts at 4.48 (K_0), K_1 at 5.813; block 2's K_3 at
  // 6.112, its end at 6.912; block 3, older from then, stands at 1.824: K_2 at 7.053, K_3
  // at 7.853, its end at 8.653.
  GridProblem p = one_sm_two_slots();
  p.older_block_lead = 0.5;
  CHECK(k_order(p) == std::vector<Index>{0, 0, 1, 1, 2, 3, 2, 0, 3, 0, 1, 2, 1, 3, 2, 3});
  CHECK(run_grid(p).steps == 9);  // the last end, 8.653, rounded up
  // Without a lead the two slots run together: the lockstep order, two and two.
  p.older_block_lead = 0;
  CHECK(k_order(p) == std::vector<Index>{0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3});
  CHECK(run_grid(p).steps == 8);
}

TEST_CASE("grid older first: a lead of 0 is the drift schedule, access for access") {
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 30; ++trial) {
    GridProblem drift = drifting(random_small_grid(rng, {1, 17, 97, 113}), 0.05, pick(rng));
    GridProblem older = drift;
    older.schedule = GridSchedule::older_first;
    CAPTURE(drift.N);
    CAPTURE(drift.sm_count);
    CAPTURE(drift.blocks_per_sm);
    check_same_counts(run_grid(older), run_grid(drift));
    CHECK(events_of(older) == events_of(drift));
    // With one block an SM there is no younger block: the lead speeds every block alike, by
    // 1 + 0.3 / 2, so the grid ends that much sooner (its time rounded up to whole tiles).
    drift.blocks_per_sm = older.blocks_per_sm = 1;
    drift.block_time_spread = older.block_time_spread = 0;
    older.older_block_lead = 0.3;
    // (A time that is a whole number of tiles may round up once more: 184 / 1.15 = 160.)
    const double sooner = double(run_grid(drift).steps) / 1.15;
    CHECK(double(run_grid(older).steps) >= sooner - 1e-9);
    CHECK(double(run_grid(older).steps) <= sooner + 1);
  }
}

TEST_CASE("grid older first: the lead refused out of range or without its schedule") {
  const auto refuses = [](GridProblem p, const char* words) {
    CAPTURE(words);
    CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains(words), cpu::InvalidArgument);
  };
  GridProblem p = one_sm_two_slots();
  p.older_block_lead = -0.1;
  refuses(p, "older_block_lead = -0.1: give 0 to under 1");
  p.older_block_lead = 1;
  refuses(p, "older_block_lead = 1: give 0 to under 1");
  p.older_block_lead = std::numeric_limits<double>::quiet_NaN();
  refuses(p, "older_block_lead = nan");
  p.older_block_lead = 0.05;
  p.schedule = GridSchedule::drift;
  refuses(p, "with the drift schedule, which does not pace blocks by age");
  // The H200's figure is one the model takes.
  p.schedule = GridSchedule::older_first;
  p.older_block_lead = find_profile("h200").older_block_lead;
  CHECK(p.older_block_lead > 0);
  CHECK_NOTHROW(run_grid(p));
}

}  // namespace flashlab::sim::test

// The grid model's L1 (flashlab/sim/grid.hpp, "The L1"): a hand-worked grid event by event,
// where blocks land on SMs (a partial wave, a later wave, heads that share nothing and GQA
// heads that share their KV head), a tile the L1 cannot hold, the drift schedule at sigma 0
// against lockstep on random grids, the logged schedule (blocks where a log puts them) and its
// refusals, the carve-out arithmetic of the H200's profile, and
// what the scalar kernel's mirror predicts at one head.
#include "grid_events.hpp"
#include "helpers.hpp"

#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/profiles.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace flashlab::sim::test {

namespace {

constexpr Bytes kKiB = 1024;

// 1 head of N = 16 in query tiles of 4 rows (4 blocks) and K/V tiles of 8 (2 steps); d = 16
// in bf16, so a K or V tile is 8 x 32 = 256 bytes. 2 SMs of 2 slots: blocks 0 and 2 run on
// SM 0, 1 and 3 on SM 1. An L1 of 1024 bytes holds four K/V tiles; the L2 holds everything.
GridProblem two_sms(Bytes l1_bytes) {
  return {.N = 16,
          .d = 16,
          .dtype = DType::bf16,
          .heads = 1,
          .Br = 4,
          .Bc = 8,
          .blocks_per_sm = 2,
          .sm_count = 2,
          .l2_bytes = 1 << 20,
          .l1_bytes = l1_bytes};
}

std::vector<std::string> kv_events(const GridProblem& p) {
  std::vector<std::string> out;
  for (const std::string& e : events_of(p))
    if (e.find(" K ") != std::string::npos || e.find(" V ") != std::string::npos) out.push_back(e);
  return out;
}

Bytes kv_read(const GridReport& r) { return r.tensor("K").read + r.tensor("V").read; }

}  // namespace

TEST_CASE("grid L1: a hand-worked grid of 2 SMs, 4 blocks: the second block of an SM hits") {
  // Step 0: block 0 (SM 0) misses K_0 and V_0 in the L2; block 1 (SM 1) finds them there;
  // blocks 2 and 3 find them in their SMs' L1s, so the L2 never sees them. Step 1 alike.
  const std::vector<std::string> expected = {"miss K 0 256", "miss V 0 256", "hit K 0 256",
                                             "hit V 0 256",  "miss K 8 256", "miss V 8 256",
                                             "hit K 8 256",  "hit V 8 256"};
  CHECK(kv_events(two_sms(1024)) == expected);
  const GridReport with_l1 = run_grid(two_sms(1024));
  // Two blocks of four load each of the 4 tiles into their SM: 2 x 4 x 256 bytes cross,
  // as many are served by the L1s.
  CHECK(kv_read(with_l1) == 2 * 4 * 256);
  CHECK(with_l1.l1_hit_bytes == 2 * 4 * 256);
  CHECK(with_l1.sm_read() == with_l1.tensor("Q").read + 2 * 4 * 256);

  // Without an L1 every block's every tile crosses, and the L2 sees each.
  const GridReport without = run_grid(two_sms(0));
  CHECK(kv_read(without) == 4 * 4 * 256);
  CHECK(without.l1_hit_bytes == 0);
  CHECK(kv_events(two_sms(0)).size() == 16);
  // Block by block (an observer turns the grouping of blocks that run alike off), the L1
  // spares the L2 8 accesses.
  const auto quiet = [](const L2Event&) {};
  CHECK(run_grid(two_sms(0), quiet).l2_accesses - run_grid(two_sms(1024), quiet).l2_accesses == 8);
  // The L1 changes no DRAM byte here (the L2 holds everything either way).
  CHECK(without.dram_read() == with_l1.dram_read());
}

TEST_CASE("grid L1: a partial wave spreads over the SMs before doubling up") {
  // 3 SMs of 2 slots, 4 blocks: SMs 0, 1, 2, 0. Only SM 0 holds two blocks.
  GridProblem p = two_sms(1024);
  p.sm_count = 3;
  const GridReport r = run_grid(p);
  CHECK(r.l1_hit_bytes == 1 * 4 * 256);
  CHECK(kv_read(r) == 3 * 4 * 256);
}

TEST_CASE("grid L1: a later wave takes the slots freed first, in block order") {
  // 6 blocks (N = 24), 3 steps, on 2 SMs of 2 slots. Wave 1: blocks 0 to 3 on SMs 0, 1, 0, 1
  // (two pairs share). They end together and free slots 0 to 3 in that order: blocks 4 and
  // 5 take slots 0 and 1, SMs 0 and 1, alone. Their first tiles are long gone from the L1
  // (4 tiles, LRU: wave 1 left K_1, V_1, K_2, V_2; K_0 pushes K_1 out, and so on).
  GridProblem p = two_sms(1024);
  p.N = 24;
  const GridReport r = run_grid(p);
  CHECK(r.l1_hit_bytes == 2 * 3 * 2 * 256);
  CHECK(kv_read(r) == (6 - 2) * 3 * 2 * 256);
  // The same blocks, one at a time through the L2 (an observer turns grouping off).
  const GridReport alone = run_grid(p, [](const L2Event&) {});
  CHECK(alone.l1_hit_bytes == r.l1_hit_bytes);
  CHECK(alone.sm_read() == r.sm_read());
}

TEST_CASE("grid L1: heads share an SM's L1 only where they read the same KV head") {
  // 2 heads, one block each (N = 8, Br = 8), both on the one SM; 1 step.
  GridProblem p = two_sms(1024);
  p.N = 8;
  p.Br = 8;
  p.heads = 2;
  p.sm_count = 1;
  CHECK(run_grid(p).l1_hit_bytes == 0);  // two KV heads: different tiles
  p.kv_heads = 1;                        // GQA: both read KV head 0
  CHECK(run_grid(p).l1_hit_bytes == 2 * 256);
}

TEST_CASE("grid L1: a tile larger than the L1 is never kept there") {
  const GridReport r = run_grid(two_sms(128));
  CHECK(r.l1_hit_bytes == 0);
  CHECK(kv_read(r) == kv_read(run_grid(two_sms(0))));
}

TEST_CASE("grid L1: the drift schedule at sigma = 0 is lockstep, L1 hit for hit") {
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 40; ++trial) {
    GridProblem p = random_small_grid(rng, {1, 17, 97, 113, 200});
    p.blocks_per_sm = 1 + pick(rng) % 3;
    p.l1_bytes = 64 * (1 + pick(rng) % 32);
    CAPTURE(p.N);
    CAPTURE(p.d);
    CAPTURE(p.heads);
    CAPTURE(p.kv_heads);
    CAPTURE(p.Br);
    CAPTURE(p.Bc);
    CAPTURE(p.blocks_per_sm);
    CAPTURE(p.sm_count);
    CAPTURE(p.l1_bytes);
    CAPTURE(p.causal);
    const GridReport lockstep = run_grid(p);
    GridProblem d = p;
    d.schedule = GridSchedule::drift;
    const GridReport drift = run_grid(d);
    CHECK(drift.l1_hit_bytes == lockstep.l1_hit_bytes);
    CHECK(drift.sm_read() == lockstep.sm_read());
    CHECK(drift.dram_read() == lockstep.dram_read());
    // What the L1s served and what crossed add up to what the blocks loaded.
    GridProblem no_l1 = p;
    no_l1.l1_bytes = 0;
    CHECK(lockstep.sm_read() + lockstep.l1_hit_bytes == run_grid(no_l1).sm_read());
  }
}

namespace {

// A log of the two_sms grid's 4 blocks: each on `sm[b]`, from start[b] to start[b] + 10.
std::vector<LoggedBlock> log_of(std::vector<Index> sm, std::vector<double> start) {
  std::vector<LoggedBlock> log;
  for (std::size_t b = 0; b < sm.size(); ++b) log.push_back({sm[b], start[b], start[b] + 10});
  return log;
}

GridProblem logged(std::vector<LoggedBlock> log) {
  GridProblem p = two_sms(1024);
  p.schedule = GridSchedule::logged;
  p.block_log = std::move(log);
  return p;
}

}  // namespace

TEST_CASE("grid L1: the logged schedule puts each block on its SM at its times") {
  // The lockstep placement, logged: blocks 0 and 2 on SM 0, 1 and 3 on SM 1, all together.
  // K_j and V_j at start + 5 j: the same hits as lockstep.
  const GridReport as_lockstep = run_grid(logged(log_of({0, 1, 0, 1}, {0, 0, 0, 0})));
  CHECK(as_lockstep.l1_hit_bytes == run_grid(two_sms(1024)).l1_hit_bytes);
  CHECK(as_lockstep.l1_hit_bytes == 2 * 4 * 256);
  // All four on SM 0 at once: one block loads each tile across, three find it in the L1.
  const GridReport one_sm = run_grid(logged(log_of({0, 0, 0, 0}, {0, 1, 2, 3})));
  CHECK(one_sm.l1_hit_bytes == 3 * 4 * 256);
  CHECK(kv_read(one_sm) == 4 * 256);
  // Each on an SM of its own: nothing shared (the L2 serves the repeats).
  GridProblem four = logged(log_of({0, 1, 2, 3}, {0, 0, 0, 0}));
  four.sm_count = 4;
  CHECK(run_grid(four).l1_hit_bytes == 0);
  CHECK(kv_read(run_grid(four)) == 4 * 4 * 256);
  // Two on SM 0 one after the other, with an L1 of 2 tiles (K_1, V_1 left when the second
  // starts): the second misses K_0 and V_0, which push K_1 and V_1 out, and misses those too.
  GridProblem apart = logged(log_of({0, 0, 1, 1}, {0, 20, 0, 40}));
  apart.l1_bytes = 512;
  CHECK(run_grid(apart).l1_hit_bytes == 0);
  // With room for all four tiles, the later block finds every one.
  apart.l1_bytes = 1024;
  CHECK(run_grid(apart).l1_hit_bytes == 2 * 4 * 256);
  // The grid's time is the last end.
  CHECK(run_grid(apart).steps == 50);
}

TEST_CASE("grid L1: a step log replays each step when the block began it") {
  // Two heads of N = 8 in query tiles of 4 (blocks 0 and 1 head 0, 2 and 3 head 1), K/V tiles
  // of 4 rows (128 bytes, 2 steps), an L1 of two tiles. On SM 0: block 0 (head 0) from 0 to
  // 10, block 2 (head 1) from 1 to 11, block 1 (head 0) from 2 to 30; block 3 alone on SM 1.
  GridProblem p = two_sms(256);
  p.N = 8;
  p.Bc = 4;
  p.heads = 2;
  p.schedule = GridSchedule::logged;
  p.block_log = {{0, 0, 10}, {0, 2, 30}, {0, 1, 11}, {1, 0, 10}};
  // At an even pace block 1 takes K_1 and V_1 at 16, after block 2 loaded its own head's K_1
  // and V_1 at 6 over block 0's of 5: it misses every tile, and so does everyone else.
  CHECK(run_grid(p).l1_hit_bytes == 0);
  // Logged as beginning its second step at 5.5, just after block 0's at 5, it finds both.
  p.block_log[1].step_starts = {2, 5.5};
  const GridReport stepped = run_grid(p);
  CHECK(stepped.l1_hit_bytes == 2 * 128);
  CHECK(stepped.steps == 30);  // the grid's time is still the last end
  // A step log of the even pace's own times replays as no step log does.
  p.block_log[1].step_starts = {2, 16};
  p.block_log[0].step_starts = {0, 5};
  CHECK(run_grid(p).l1_hit_bytes == 0);
  // One start a step, in order, from the block's start to its end.
  p.block_log[1].step_starts = {2};
  CHECK_THROWS_WITH_AS(run_grid(p),
                       doctest::Contains("block_log[1] has 1 step starts for its 2 steps"),
                       cpu::InvalidArgument);
  p.block_log[1].step_starts = {6, 5};
  CHECK_THROWS_WITH_AS(run_grid(p),
                       doctest::Contains("block_log[1] starts step 1 at 5: give step starts in "
                                         "order from the block's start (2) to its end (30)"),
                       cpu::InvalidArgument);
  p.block_log[1].step_starts = {1, 5};
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("block_log[1] starts step 0 at 1"),
                       cpu::InvalidArgument);
  p.block_log[1].step_starts = {2, 31};
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("block_log[1] starts step 1 at 31"),
                       cpu::InvalidArgument);
}

TEST_CASE("grid L1: a logged block reads through its SM's partition (sm_partitions)") {
  // Q_b is read at row 4 b (Br = 4, one head): its first event tells the partition block b
  // read through. Blocks 0 and 2 on SM 0, 1 and 3 on SM 1, the L2 in two partitions.
  const std::vector<Index> sm{0, 1, 0, 1};
  GridProblem p = logged(log_of(sm, {0, 0, 20, 20}));
  p.l1_bytes = 0;
  p.l2_partitions = 2;
  const auto q_partitions = [&] {
    std::vector<int> out(4, -1);
    run_grid(p, [&](const L2Event& e) {
      if (e.tensor == kQ && out[std::size_t(e.row0 / 4)] < 0) out[std::size_t(e.row0 / 4)] = e.partition;
    });
    return out;
  };
  CHECK(q_partitions() == std::vector<int>{0, 1, 0, 1});  // without a map: block b mod 2
  p.sm_partitions = {1, 0};  // SM 0 reads through partition 1, SM 1 through 0
  CHECK(q_partitions() == std::vector<int>{1, 0, 1, 0});
  p.sm_partitions = {1, 1};
  CHECK(q_partitions() == std::vector<int>{1, 1, 1, 1});
  // Bad maps, and a map where blocks take slots rather than logged SMs.
  p.sm_partitions = {1};
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("sm_partitions has 1 entries for 2 SMs"),
                       cpu::InvalidArgument);
  p.sm_partitions = {0, 2};
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("sm_partitions[1] = 2: give a partition"),
                       cpu::InvalidArgument);
  GridProblem lockstep = two_sms(0);
  lockstep.l2_partitions = 2;
  lockstep.sm_partitions = {0, 1};
  CHECK_THROWS_WITH_AS(run_grid(lockstep), doctest::Contains("give schedule logged"),
                       cpu::InvalidArgument);
}

TEST_CASE("grid L1: a bad block log is refused with what would be right") {
  CHECK_THROWS_WITH_AS(run_grid(logged(log_of({0, 1, 0}, {0, 0, 0}))),
                       doctest::Contains("a block_log of 3 blocks for a grid of 4"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(run_grid(logged(log_of({0, 1, 2, 0}, {0, 0, 0, 0}))),
                       doctest::Contains("block_log[2] runs on SM 2: give an SM from 0 to"),
                       cpu::InvalidArgument);
  std::vector<LoggedBlock> backwards = log_of({0, 1, 0, 1}, {0, 0, 0, 0});
  backwards[1].end = -1;
  CHECK_THROWS_WITH_AS(run_grid(logged(backwards)),
                       doctest::Contains("block_log[1] starts at 0 and ends at -1"),
                       cpu::InvalidArgument);
  GridProblem not_logged = two_sms(1024);
  not_logged.block_log = log_of({0, 1, 0, 1}, {0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(run_grid(not_logged),
                       doctest::Contains("with the lockstep schedule, which places blocks itself"),
                       cpu::InvalidArgument);
  GridProblem spread = logged(log_of({0, 1, 0, 1}, {0, 0, 0, 0}));
  spread.block_time_spread = 0.1;
  CHECK_THROWS_WITH_AS(run_grid(spread), doctest::Contains("with the logged schedule"),
                       cpu::InvalidArgument);
}

TEST_CASE("grid L1: bad L1 sizes are refused with what would be right") {
  GridProblem p = two_sms(-1);
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("an L1 of -1 bytes: give 0"),
                       cpu::InvalidArgument);
  p = two_sms(1024);
  p.N = 1 << 22;
  p.Br = 1;
  p.sm_count = 1 << 16;
  p.blocks_per_sm = 1024;
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("resident blocks with an L1"),
                       cpu::InvalidArgument);
}

TEST_CASE("profile: the L1 left beside shared memory, from the H200's carve-outs") {
  const SmLimits& sm = find_profile("h200").sm;
  CHECK(sm.unified_cache_bytes == 256 * kKiB);
  REQUIRE(sm.carveout_count == 10);
  CHECK(std::is_sorted(sm.carveouts.begin(), sm.carveouts.begin() + sm.carveout_count));
  // No shared memory: the whole cache is L1.
  CHECK(l1_beside_shared(sm, 4, 0) == 256 * kKiB - 8 * kKiB);  // 4 KiB of reserve: 8 KiB
  // 3 blocks of 74 KiB (+ 1 KiB each): 225 KiB, the 228 KiB carve-out, 28 KiB left.
  CHECK(l1_beside_shared(sm, 3, 74 * kKiB) == 28 * kKiB);
  // Exactly a carve-out: 2 x (63 + 1) = 128 KiB fits 132.
  CHECK(l1_beside_shared(sm, 2, 63 * kKiB) == (256 - 132) * kKiB);
  CHECK_THROWS_WITH_AS(l1_beside_shared(sm, 4, 74 * kKiB),
                       doctest::Contains("largest carve-out is 233472 bytes"),
                       cpu::InvalidArgument);
  CHECK(blocks_by_shared_and_threads(sm, 64, 74 * kKiB) == 3);
  CHECK(blocks_by_shared_and_threads(sm, 1024, 0) == 2);  // by threads
  CHECK(blocks_by_shared_and_threads(sm, 32, 0) == 32);   // by the block limit
  CHECK_THROWS_AS(blocks_by_shared_and_threads(sm, 0, 0), cpu::InvalidArgument);
}

}  // namespace flashlab::sim::test

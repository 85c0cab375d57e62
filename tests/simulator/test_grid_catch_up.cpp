// The grid model's catch_up schedule (flashlab/sim/grid.hpp): a step whose tiles the L2 held
// takes l2_step_share of one whose tiles came from DRAM, worked by hand on two blocks that
// take the lead from each other; one pace for all the blocks of a KV head; a share of 1 and
// no spread as the lockstep schedule, access for access; the parameter refused out of range;
// and the order of a causal grid's query tiles (causal_longest_first), which the scalar
// kernel, whose grid this schedule runs, does not reverse.
#include "grid_events.hpp"
#include "helpers.hpp"

#include "flashlab/sim/grid.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace flashlab::sim::test {

namespace {

// One SM of two slots, one head of N = 12: query tiles of 8 rows (block 0: rows 0..7, block
// 1: rows 8..11), K/V tiles of 4 (Tc = 3). d = 16 in bf16: a row is 32 bytes, a K or V tile
// 128, Q_0 and O_0 256, Q_1 and O_1 128, L_0 32 and L_1 16 (a whole sector of 32 at the
// L2). An L2 that holds everything.
GridProblem two_blocks_one_sm(double share) {
  return {.N = 12,
          .d = 16,
          .heads = 1,
          .Br = 8,
          .Bc = 4,
          .blocks_per_sm = 2,
          .sm_count = 1,
          .l2_bytes = 4096,
          .schedule = GridSchedule::catch_up,
          .l2_step_share = share};
}

}  // namespace

TEST_CASE("grid catch_up: a step the L2 serves takes the share, and the lead changes hands") {
  // Share 0.5, both blocks at pace 1 (no spread). t = 0: block 0 reads K_0, V_0 from DRAM (its
  // next step at 1), block 1 finds them (next at 0.5). t = 0.5: block 1, ahead, reads K_1 and
  // V_1 from DRAM (next at 1.5). t = 1: block 0 finds them (next at 1.5). t = 1.5: block 0
  // first (block order), K_2 and V_2 from DRAM (its end at 2.5); block 1 finds them (its end
  // at 2). So block 1 stores first, and the grid takes 2.5 tile times.
  const std::vector<std::string> expected = {
      "miss Q 0 256",     "miss Q 8 128",      // t = 0, the starts
      "miss K 0 128",     "miss V 0 128",      // block 0
      "hit K 0 128",      "hit V 0 128",       // block 1
      "miss K 4 128",     "miss V 4 128",      // t = 0.5, block 1
      "hit K 4 128",      "hit V 4 128",       // t = 1, block 0
      "miss K 8 128",     "miss V 8 128",      // t = 1.5, block 0
      "hit K 8 128",      "hit V 8 128",       // t = 1.5, block 1
      "allocate O 8 128", "allocate L 8 32",   // t = 2, block 1 ends
      "allocate O 0 256", "allocate L 0 32"};  // t = 2.5, block 0 ends
  CHECK(events_of(two_blocks_one_sm(0.5)) == expected);
  CHECK(run_grid(two_blocks_one_sm(0.5)).steps == 3);  // 2.5, rounded up

  // A share of 1: block 0 leads throughout and both end at t = 3, block 0's stores first.
  const std::vector<std::string> in_step = {
      "miss Q 0 256",    "miss Q 8 128",     "miss K 0 128",   "miss V 0 128", "hit K 0 128",
      "hit V 0 128",     "miss K 4 128",     "miss V 4 128",   "hit K 4 128",  "hit V 4 128",
      "miss K 8 128",    "miss V 8 128",     "hit K 8 128",    "hit V 8 128",  "allocate O 0 256",
      "allocate L 0 32", "allocate O 8 128", "allocate L 8 32"};
  CHECK(events_of(two_blocks_one_sm(1.0)) == in_step);
  CHECK(run_grid(two_blocks_one_sm(1.0)).steps == 3);
}

TEST_CASE("grid catch_up: every block of a KV head runs at the head's pace") {
  // Two query heads over one KV head, one query tile each (blocks 0 and 1, one SM of two
  // slots), Tc = 2. With a spread of 1 the drift schedule draws each block its own pace;
  // catch_up draws one for the KV head, so the two blocks step together.
  GridProblem p{.N = 8,
                .d = 16,
                .heads = 2,
                .kv_heads = 1,
                .Br = 8,
                .Bc = 4,
                .blocks_per_sm = 2,
                .sm_count = 1,
                .l2_bytes = 4096,
                .schedule = GridSchedule::catch_up,
                .block_time_spread = 1.0,
                .seed = 2};
  const std::vector<std::string> together = {
      "miss Q 0 256",     "miss Q 8 256",    "miss K 0 128",     "miss V 0 128",   "hit K 0 128",
      "hit V 0 128",      "miss K 4 128",    "miss V 4 128",     "hit K 4 128",    "hit V 4 128",
      "allocate O 0 256", "allocate L 0 32", "allocate O 8 256", "allocate L 8 32"};
  CHECK(events_of(p) == together);
  // The drift schedule's own draws for blocks 0 and 1 differ (0.27 and 1.31 tile times at
  // seed 2): block 0 runs ahead alone, and the order is not the one above.
  GridProblem drift = p;
  drift.schedule = GridSchedule::drift;
  REQUIRE(block_tile_time(drift, 0) != block_tile_time(drift, 1));
  CHECK(events_of(drift) != together);
}

TEST_CASE("grid catch_up: a share of 1 and no spread is the lockstep schedule, access for access") {
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 30; ++trial) {
    GridProblem lockstep = random_small_grid(rng, {1, 7, 16, 33, 64});
    lockstep.l1_bytes = pick(rng) % 2 ? 0 : 64 * (1 + pick(rng) % 8);
    GridProblem caught = lockstep;
    caught.schedule = GridSchedule::catch_up;
    CAPTURE(lockstep.N);
    CAPTURE(lockstep.N_q);
    CAPTURE(lockstep.heads);
    CAPTURE(lockstep.l1_bytes);
    CHECK(events_of(caught) == events_of(lockstep));
    const GridReport a = run_grid(caught), b = run_grid(lockstep);
    CHECK(a.l1_hit_bytes == b.l1_hit_bytes);
    CHECK(a.dram_read() == b.dram_read());
  }
}

TEST_CASE("grid catch_up: a faster L2 never changes what the SMs load, only where it comes from") {
  // The same blocks load the same tiles whatever their pace: into the SMs (the loads less
  // the L1's hits) may change with the share, the blocks' loads may not.
  auto rng = fresh_rng();
  for (int trial = 0; trial < 20; ++trial) {
    GridProblem p = random_small_grid(rng, {16, 33, 64, 100});
    p.l1_bytes = 256;
    p.schedule = GridSchedule::catch_up;
    p.block_time_spread = 0.1;
    GridProblem faster = p;
    faster.l2_step_share = 0.6;
    const GridReport a = run_grid(p), b = run_grid(faster);
    CAPTURE(p.N);
    CAPTURE(p.heads);
    CHECK(a.tensor("K").read + a.tensor("V").read + a.l1_hit_bytes ==
          b.tensor("K").read + b.tensor("V").read + b.l1_hit_bytes);
    CHECK(a.tensor("Q").read == b.tensor("Q").read);
    CHECK(a.tensor("O").written == b.tensor("O").written);
  }
}

TEST_CASE("grid catch_up: the share is refused out of range or without the schedule") {
  for (const double bad : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    GridProblem p = two_blocks_one_sm(bad);
    CHECK_THROWS_WITH_AS(check(p), doctest::Contains("give more than 0 and at most 1"),
                         cpu::InvalidArgument);
  }
  GridProblem drift = two_blocks_one_sm(0.8);
  drift.schedule = GridSchedule::drift;
  CHECK_THROWS_WITH_AS(check(drift), doctest::Contains("give schedule catch_up, or a share of 1"),
                       cpu::InvalidArgument);
  CHECK_NOTHROW(check(two_blocks_one_sm(1.0)));
  CHECK(to_string(GridSchedule::catch_up) == "catch_up");
}

TEST_CASE("grid: a causal grid that runs its query tiles in order, as the scalar kernel does") {
  // One head of N = 16, query tiles of 8 rows, K/V tiles of 4, two SMs of one slot. Longest
  // first (fa2's), block 0 runs query tile 1 (Q rows 8..15, four KV tiles) and block 1 tile 0
  // (two); in order, block 0 runs tile 0, so Q_0 is the first load.
  GridProblem p{.N = 16,
                .d = 16,
                .heads = 1,
                .causal = cpu::Causal::top_left,
                .Br = 8,
                .Bc = 4,
                .blocks_per_sm = 1,
                .sm_count = 2,
                .l2_bytes = 4096};
  const auto longest = events_of(p);
  REQUIRE(!longest.empty());
  CHECK(longest.front() == "miss Q 8 256");
  p.causal_longest_first = false;
  const auto in_order = events_of(p);
  CHECK(in_order.front() == "miss Q 0 256");
  // Tile 0 ends first either way; in order it is block 0's, so its store precedes tile 1's.
  const auto at = [&](const std::string& e) {
    return std::find(in_order.begin(), in_order.end(), e) - in_order.begin();
  };
  CHECK(at("allocate O 0 256") < at("allocate O 8 256"));
  // The same tiles move either way.
  const GridReport a = run_grid(p);
  p.causal_longest_first = true;
  const GridReport b = run_grid(p);
  CHECK(a.tensor("K").read == b.tensor("K").read);
  CHECK(a.tensor("K").read == (4 + 2) * 128);
}

}  // namespace flashlab::sim::test

// fa3's tile scheduler (flashlab/gpu/tile_schedule.hpp) on the CPU: every work item is
// taken exactly once, sections of heads fit the L2 share they are planned for, causal tiles
// go longest first, the grid is what the option says, and the static turns of a persistent
// grid balance equal tiles but not causal ones (why FLASHLAB_FA3_GRID_AUTO is persistent
// only without the mask), while the work queue, run here as the kernel's producers take
// from it, gives every item to one block and balances causal tiles as dispatch does.
#include <doctest/doctest.h>

#include "flashlab/gpu/tile_balance.hpp"
#include "flashlab/gpu/tile_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace flashlab::gpu::fa3 {
namespace {

constexpr int64_t kH200L2 = 60 * 1024 * 1024;
constexpr int64_t kH200Sms = 132;

struct Shape {
  int64_t batch, heads_q, heads_kv, n_q, n_k, d;
};

TileOrder order_of(const Shape& s, bool causal, int64_t l2 = kH200L2) {
  return make_tile_order(s.batch, s.heads_q, s.heads_kv, s.n_q, s.n_k, s.d, 2, causal, l2);
}

// Awkward sizes; several sections with a partial last one (a small L2); GQA and MQA.
const std::vector<std::pair<Shape, int64_t>> kCases = {
    {{1, 1, 1, 1, 1, 64}, kH200L2},          {{1, 3, 1, 17, 97, 128}, kH200L2},
    {{2, 5, 5, 113, 1023, 64}, kH200L2},     {{3, 7, 7, 1023, 113, 128}, 1 << 20},
    {{2, 16, 4, 4096, 4096, 128}, 8 << 20},  {{16, 16, 16, 1024, 1024, 128}, kH200L2},
    {{1, 32, 8, 16384, 16384, 64}, kH200L2}, {{2, 6, 3, 300, 700, 128}, 0}};

TEST_CASE("tile order: every (batch, head, query tile) exactly once") {
  for (const auto& [s, l2] : kCases)
    for (bool causal : {false, true}) {
      const TileOrder o = order_of(s, causal, l2);
      INFO("batch=", s.batch, " heads_q=", s.heads_q, " N_q=", s.n_q, " causal=", causal);
      const int64_t tiles = (s.n_q + br(s.d) - 1) / br(s.d);
      REQUIRE(o.items == s.batch * s.heads_q * tiles);
      std::set<std::tuple<int, int, int>> seen;
      for (int64_t w = 0; w < o.items; ++w) {
        const WorkItem it = work_item(o, w);
        CHECK(it.b >= 0);
        CHECK(it.b < s.batch);
        CHECK(it.h >= 0);
        CHECK(it.h < s.heads_q);
        CHECK(it.tile >= 0);
        CHECK(it.tile < tiles);
        seen.insert({it.b, it.h, it.tile});
      }
      CHECK(int64_t(seen.size()) == o.items);
    }
}

TEST_CASE("tile order: more items than an int holds are taken in 64-bit integers") {
  // 32768 x 65535 (batch, head) pairs (validation allows up to INT_MAX pairs) x 2 query
  // tiles: 4.3e9 items.
  const TileOrder o = make_tile_order(32768, 65535, 65535, 2 * br(64), 1, 64, 2, false, kH200L2);
  REQUIRE(o.items > kMaxInt32);
  const int64_t per_section = int64_t(o.section_pairs) * o.tiles;
  const int64_t partial = 0;  // without the mask the partial section, if any, is the last
  const int64_t whole = int64_t(o.pairs) / o.section_pairs;
  INFO("section_pairs=", o.section_pairs, " whole sections=", whole);
  // The first item is pair 0's; a whole section's first item is its first pair's first tile;
  // the last item, the last pair's last tile; and the 32-bit path agrees with the 64-bit one
  // wherever both apply.
  CHECK(work_item(o, 0).b == 0);
  CHECK(work_item(o, 0).h == 0);
  for (int64_t s : {int64_t(0), whole / 2, whole - 1}) {
    const WorkItem first = work_item(o, partial * o.tiles + s * per_section);
    CHECK(int64_t(first.b) * o.heads_q + first.h == partial + s * o.section_pairs);
    CHECK(first.tile == 0);
  }
  const WorkItem last = work_item(o, o.items - 1);
  CHECK(last.b == 32767);
  CHECK(last.h == 65534);
  CHECK(last.tile == o.tiles - 1);
  for (int64_t w : {int64_t(0), int64_t(1), partial * o.tiles + 1, partial * o.tiles,
                    per_section - 1, per_section, kMaxInt32}) {
    const WorkItem a = work_item_as<int64_t>(o, w);
    const WorkItem b = work_item_as<int>(o, int(w));
    CHECK(a.b == b.b);
    CHECK(a.h == b.h);
    CHECK(a.tile == b.tile);
  }
}

TEST_CASE("tile order: a section's K and V fit the L2 share, in as few sections as fit") {
  // The shares: a quarter without the mask, a half under it (kernel_info.hpp says why).
  CHECK(kv_section_budget(int64_t(60) << 20, false) == int64_t(15) << 20);
  CHECK(kv_section_budget(int64_t(60) << 20, true) == int64_t(30) << 20);
  for (const auto& [s, l2] : kCases)
    for (bool causal : {false, true}) {
      const TileOrder o = order_of(s, causal, l2);
      const int64_t group = s.heads_q / s.heads_kv;
      const int64_t kv_per_pair = (2 * s.n_k * s.d * 2 + group - 1) / group;
      const int64_t budget = kv_section_budget(l2, causal, auto_kv_l2_share(causal, s.d, o.tiles));
      INFO("heads_q=", s.heads_q, " N_k=", s.n_k, " d=", s.d, " L2=", l2, " causal=", causal);
      CHECK(o.section_pairs >= 1);
      CHECK(o.section_pairs <= o.pairs);
      if (o.section_pairs > 1) CHECK(o.section_pairs * kv_per_pair <= budget);
      // The most pairs whose K and V fit the budget (one at least).
      const int64_t most = std::clamp<int64_t>(budget / kv_per_pair, 1, o.pairs);
      const int64_t sections = (o.pairs + o.section_pairs - 1) / o.section_pairs;
      CHECK(sections == (o.pairs + most - 1) / most);  // no more sections than fit needs
      if (!causal) {
        CHECK(o.section_pairs == most);  // without the mask: as large as fits
      } else {
        // Under the mask evened out: the partial section, first, is within `sections` pairs
        // of a whole one.
        const int64_t partial = o.pairs % o.section_pairs;
        CHECK((partial == 0 || partial > o.section_pairs - sections));
      }
    }
}

TEST_CASE("tile order: kv_l2_share plans the sections on that percent of the L2") {
  constexpr int64_t l2 = int64_t(60) << 20;
  for (bool causal : {false, true}) {
    CHECK(kv_section_budget(l2, causal, FLASHLAB_FA3_AUTO) == kv_section_budget(l2, causal));
    CHECK(kv_section_budget(l2, causal, 37) == l2 * 37 / 100);
    CHECK(kv_section_budget(l2, causal, kMaxKvL2Share) == l2);
  }
  CHECK(is_kv_l2_share(FLASHLAB_FA3_AUTO));
  CHECK(is_kv_l2_share(1));
  CHECK(is_kv_l2_share(kMaxKvL2Share));
  CHECK_FALSE(is_kv_l2_share(0));
  CHECK_FALSE(is_kv_l2_share(-2));
  CHECK_FALSE(is_kv_l2_share(kMaxKvL2Share + 1));
  // 16 heads of N = 4096 at d = 128: 2 MiB of K and V a head. Under the mask the default plans
  // on 30 MiB (room for 15 heads: two sections, evened out to 8 and 8); a share given takes as
  // many as fit: 50% 15 (a partial section of 1, then 15), 25% on 15 MiB 7 (2, then 7 and 7),
  // 100% on all 60 MiB (the 16 heads in one).
  const auto sections = [&](int32_t share) {
    return make_tile_order(1, 16, 16, 4096, 4096, 128, 2, true, l2, share).section_pairs;
  };
  CHECK(sections(FLASHLAB_FA3_AUTO) == 8);
  CHECK(sections(50) == 15);
  CHECK(sections(25) == 7);
  CHECK(sections(100) == 16);
  CHECK(sections(1) == 1);  // less than a head's K and V: one head a section
  // FLASHLAB_FA3_AUTO: a quarter under the mask at d = 128 for heads of at most 12 query tiles
  // (N <= 1,536), the half beyond and at d = 64, a quarter without the mask.
  for (int64_t d : {64, 128})
    for (int64_t n : {1, 768, 1536, 1537, 4096})
      for (bool causal : {false, true}) {
        const int64_t tiles = (n + br(d) - 1) / br(d);
        const bool quarter = causal && d == 128 && n <= 1536;
        INFO("d=", d, " N=", n, " causal=", causal);
        CHECK(auto_kv_l2_share(causal, d, tiles) ==
              (quarter ? kMaxKvL2Share / 4 : FLASHLAB_FA3_AUTO));
      }
  // B = 16 x H = 16 at N = 1,024, d = 128 (0.5 MiB of K and V a head): room for 30 heads on the
  // quarter under the mask, so 9 sections of 256 pairs, evened out to 29 (a partial 24 first);
  // without the mask 30, as large as fits; the half given would take 60. d = 64 at N = 2,048
  // (0.5 MiB a head too) keeps the half under the mask: room for 60, 5 sections of 52.
  CHECK(make_tile_order(16, 16, 16, 1024, 1024, 128, 2, true, l2).section_pairs == 29);
  CHECK(make_tile_order(16, 16, 16, 1024, 1024, 128, 2, false, l2).section_pairs == 30);
  CHECK(make_tile_order(16, 16, 16, 1024, 1024, 128, 2, true, l2, 50).section_pairs == 60);
  CHECK(make_tile_order(8, 32, 32, 2048, 2048, 64, 2, true, l2).section_pairs == 52);
}

// Whether item w is the first of a section: the partial one (pairs mod G) at 0, then every
// whole one, G Tr items each.
bool starts_section(const TileOrder& o, int64_t w) {
  const int64_t partial_items =
      o.longest_first ? int64_t(o.pairs) % o.section_pairs * o.tiles : 0;
  if (w < partial_items) return w == 0;
  return (w - partial_items) % (int64_t(o.section_pairs) * o.tiles) == 0;
}

TEST_CASE("tile order: inside a section, causal tiles go from the longest to the shortest") {
  for (const auto& [s, l2] : kCases)
    for (bool causal : {false, true}) {
      const TileOrder o = order_of(s, causal, l2);
      for (int64_t w = 1; w < o.items; ++w) {
        if (starts_section(o, w)) continue;  // a new section starts over
        const WorkItem a = work_item(o, w - 1), b = work_item(o, w);
        if (causal)
          CHECK(b.tile <= a.tile);
        else
          CHECK(b.tile >= a.tile);
      }
      // The first item of every section is its longest: the last query tile under the mask.
      for (int64_t w = 0; w < o.items; ++w)
        if (starts_section(o, w)) CHECK(work_item(o, w).tile == (causal ? o.tiles - 1 : 0));
    }
}

TEST_CASE("tile order: under the mask the partial section first, the grid ending on a whole one") {
  // 7 pairs in sections of 3 (K and V of 3 pairs in the share): pair 0 alone first, then
  // pairs 1..3 and 4..6; Tr = 2 tiles a pair, causal (longest first).
  TileOrder o;
  o.heads_q = 7;
  o.pairs = 7;
  o.tiles = 2;
  o.items = 14;
  o.section_pairs = 3;
  o.longest_first = true;
  // Each item's (head, query tile), in the order's turn.
  const auto check_order = [&](const int (&expected)[14][2]) {
    for (int64_t w = 0; w < o.items; ++w) {
      CAPTURE(w);
      const WorkItem it = work_item(o, w);
      CHECK(it.h == expected[w][0]);
      CHECK(it.tile == expected[w][1]);
    }
  };
  const int by_hand[14][2] = {{0, 1}, {0, 0}, {1, 1}, {2, 1}, {3, 1}, {1, 0}, {2, 0},
                              {3, 0}, {4, 1}, {5, 1}, {6, 1}, {4, 0}, {5, 0}, {6, 0}};
  check_order(by_hand);
  // Without the mask (equal items) the partial section stays last: pairs 0..2, 3..5, then 6.
  o.longest_first = false;
  const int plain[14][2] = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 0},
                            {4, 0}, {5, 0}, {3, 1}, {4, 1}, {5, 1}, {6, 0}, {6, 1}};
  check_order(plain);
  // Sections that divide the pairs: no partial one either way.
  o.pairs = o.heads_q = 6;
  o.items = 12;
  o.longest_first = true;
  CHECK(work_item(o, 0).h == 0);
  CHECK(work_item(o, 3).h == 0);  // pairs 0..2: tiles 1, 1, 1, then 0, 0, 0
  CHECK(work_item(o, 3).tile == 0);
  CHECK(work_item(o, 6).h == 3);
}

TEST_CASE(
    "the grid: one block per SM when persistent, per tile otherwise, and auto is the work queue "
    "under the causal mask and with three consumers, else persistent up to its number of "
    "query tiles a head") {
  const Shape big{16, 16, 16, 1024, 1024, 128}, small{1, 1, 1, 97, 97, 64};
  for (bool causal : {false, true}) {
    const TileOrder o = order_of(big, causal), tiny = order_of(small, causal);
    CHECK(grid_blocks(o, true, kH200Sms) == kH200Sms);
    CHECK(grid_blocks(tiny, true, kH200Sms) == 1);  // never a block without an item
    CHECK(grid_blocks(o, false, kH200Sms) == o.items);
    for (bool ws : {false, true}) {
      CHECK(is_persistent(FLASHLAB_FA3_GRID_PERSISTENT, o, ws));
      CHECK(is_persistent(FLASHLAB_FA3_GRID_QUEUE, o, ws));
      CHECK(is_persistent(FLASHLAB_FA3_GRID_QUEUE, tiny, ws));
      CHECK_FALSE(is_persistent(FLASHLAB_FA3_GRID_PER_TILE, o, ws));
      CHECK(is_persistent(FLASHLAB_FA3_GRID_AUTO, o, ws));  // 8 tiles a head
      CHECK(is_persistent(FLASHLAB_FA3_GRID_AUTO, tiny, ws));
    }
  }
  // Without the causal mask, and under it without a producer warp: persistent up to the
  // limit, per tile beyond.
  const int64_t n_at_limit = fa3::kAutoPersistentMaxTiles * fa3::br(128);
  const Shape at_limit{1, 4, 4, n_at_limit, n_at_limit, 128},
      past_limit{1, 4, 4, n_at_limit + 1, n_at_limit + 1, 128};
  for (bool causal : {false, true}) {
    const bool ws = !causal;
    CHECK(resolve_grid(FLASHLAB_FA3_GRID_AUTO, order_of(at_limit, causal), ws) ==
          FLASHLAB_FA3_GRID_PERSISTENT);
    CHECK(resolve_grid(FLASHLAB_FA3_GRID_AUTO, order_of(past_limit, causal), ws) ==
          FLASHLAB_FA3_GRID_PER_TILE);
    CHECK_FALSE(is_persistent(FLASHLAB_FA3_GRID_AUTO, order_of(past_limit, causal), ws));
  }
  // Without the mask, three consumers (d = 64) and a producer warp: the work queue at every
  // length; two consumers (d = 128) keep the rule above, and so does d = 64 without a
  // producer warp.
  REQUIRE(fa3::consumer_warpgroups(64) >= fa3::kAutoQueueWithoutMaskMinConsumers);
  REQUIRE(fa3::consumer_warpgroups(128) < fa3::kAutoQueueWithoutMaskMinConsumers);
  const int64_t n_at_limit_64 = fa3::kAutoPersistentMaxTiles * fa3::br(64);
  for (const int64_t n : {int64_t{1}, int64_t{97}, int64_t{1023}, n_at_limit_64,
                          n_at_limit_64 + 1, 4 * n_at_limit_64}) {
    const TileOrder o64 = order_of(Shape{1, 4, 4, n, n, 64}, false);
    INFO("N=", n, " tiles=", o64.tiles);
    CHECK(resolve_grid(FLASHLAB_FA3_GRID_AUTO, o64, true) == FLASHLAB_FA3_GRID_QUEUE);
    CHECK(resolve_grid(FLASHLAB_FA3_GRID_AUTO, o64, false) ==
          (o64.tiles <= fa3::kAutoPersistentMaxTiles ? FLASHLAB_FA3_GRID_PERSISTENT
                                                     : FLASHLAB_FA3_GRID_PER_TILE));
    const TileOrder o128 = order_of(Shape{1, 4, 4, n, n, 128}, false);
    CHECK(resolve_grid(FLASHLAB_FA3_GRID_AUTO, o128, true) ==
          (o128.tiles <= fa3::kAutoPersistentMaxTiles ? FLASHLAB_FA3_GRID_PERSISTENT
                                                      : FLASHLAB_FA3_GRID_PER_TILE));
  }
  // Causal, with a producer warp: the work queue from kAutoQueueMinTiles query tiles a head,
  // at any length; the fixed turns below.
  const int64_t n_queue = fa3::kAutoQueueMinTiles * fa3::br(128);
  const std::pair<int64_t, flashlab_fa3_grid> expected[] = {
      {n_queue - fa3::br(128), FLASHLAB_FA3_GRID_PERSISTENT},  // one query tile too few
      {n_queue - fa3::br(128) + 1, FLASHLAB_FA3_GRID_QUEUE},   // the last tile ragged
      {n_queue, FLASHLAB_FA3_GRID_QUEUE},
      {n_at_limit + 1, FLASHLAB_FA3_GRID_QUEUE},
      {4 * n_at_limit, FLASHLAB_FA3_GRID_QUEUE}};
  for (const auto& [n, grid] : expected) {
    const TileOrder o = order_of(Shape{1, 4, 4, n, n, 128}, true);
    INFO("N=", n, " tiles=", o.tiles);
    CHECK(resolve_grid(FLASHLAB_FA3_GRID_AUTO, o, true) == grid);
    CHECK(is_persistent(FLASHLAB_FA3_GRID_AUTO, o, true));
  }
  // Every other value is run as it is asked.
  const TileOrder o = order_of(Shape{1, 4, 4, 4 * n_at_limit, 4 * n_at_limit, 128}, true);
  for (int grid :
       {FLASHLAB_FA3_GRID_PER_TILE, FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_QUEUE})
    for (bool ws : {false, true}) CHECK(resolve_grid(grid, o, ws) == grid);
}

TEST_CASE("the grid option's values: the four of flashlab_fa3_grid and no other") {
  for (int grid : {FLASHLAB_FA3_GRID_PER_TILE, FLASHLAB_FA3_GRID_PERSISTENT,
                   FLASHLAB_FA3_GRID_AUTO, FLASHLAB_FA3_GRID_QUEUE})
    CHECK(is_grid(grid));
  for (int grid : {-1, FLASHLAB_FA3_GRID_QUEUE + 1}) CHECK_FALSE(is_grid(grid));
}

// The work queue as the kernel runs it, for items of work(w) KV tiles: block k's producer
// takes item k first; whenever a block's producer has issued the last loads of its item
// (`lead` KV tiles, the rings' stages, before its consumers are done with it, or at its start
// if it has fewer; the earliest first, on ties the block free first, then the lower) it claims
// next_from_queue(count, grid) and the count goes up by one, until an item from `items` on
// tells it to stop. Returns each item's block (-1: untaken) and sets *balance to the busiest
// block's work over the mean.
std::vector<int64_t> run_queue(int64_t items, const std::function<int64_t(int64_t)>& work,
                               int64_t grid, int64_t lead, double* balance) {
  std::vector<int64_t> block_of(items, -1);
  std::vector<int64_t> free_at(grid, 0);                // when each block's consumers are done
  using Claim = std::tuple<int64_t, int64_t, int64_t>;  // (when the block claims, free, block)
  std::priority_queue<Claim, std::vector<Claim>, std::greater<>> claims;
  int64_t total = 0, last = 0, taken = 0;
  auto run = [&](int64_t block, int64_t item) {
    if (item >= items) return;    // the block stops
    CHECK(block_of[item] == -1);  // no item twice
    block_of[item] = block;
    const int64_t start = free_at[block];
    free_at[block] = start + work(item);
    total += work(item);
    last = std::max(last, free_at[block]);
    claims.push({std::max(start, free_at[block] - lead), free_at[block], block});
  };
  for (int64_t k = 0; k < grid; ++k) run(k, k);
  while (!claims.empty()) {
    const int64_t block = std::get<2>(claims.top());
    claims.pop();
    run(block, next_from_queue(taken++, grid));
  }
  *balance = double(last) * grid / double(total);
  return block_of;
}
std::vector<int64_t> run_queue(const TileOrder& o, int64_t grid, bool causal, int64_t lead,
                               double* balance) {
  return run_queue(
      o.items, [&](int64_t w) { return item_kv_tiles(o, w, causal); }, grid, lead, balance);
}

TEST_CASE("the work queue's early claim can hand an item to another block") {
  // Two blocks, items of 1, 2, 1 and 1 KV tiles. Taken when free: block 0 (free at 1) takes
  // item 2, and at 2 both are free, so block 0, the lower, takes item 3. Claimed 2 tiles
  // ahead: block 0 claims item 2 at once (its item is shorter than the lead) and then claims
  // again at 1, after block 1's claim at 0, which so takes item 3.
  const std::vector<int64_t> work = {1, 2, 1, 1};
  const auto cost = [&](int64_t w) { return work[w]; };
  double when_free = 0, ahead = 0;
  CHECK(run_queue(4, cost, 2, 0, &when_free) == std::vector<int64_t>{0, 1, 0, 0});
  CHECK(run_queue(4, cost, 2, 2, &ahead) == std::vector<int64_t>{0, 1, 0, 1});
  CHECK(when_free == ahead);  // the busiest block ends at 3 either way
}

TEST_CASE("the work queue: every item taken once, by one block, and blocks stop past the end") {
  for (const auto& [s, l2] : kCases)
    for (bool causal : {false, true}) {
      const TileOrder o = order_of(s, causal, l2);
      const int64_t grid =
          grid_blocks(o, is_persistent(FLASHLAB_FA3_GRID_QUEUE, o, true), kH200Sms);
      INFO("batch=", s.batch, " heads_q=", s.heads_q, " N_q=", s.n_q, " causal=", causal);
      double balance = 0;
      const std::vector<int64_t> block_of =
          run_queue(o, grid, causal, default_stages(s.d), &balance);
      CHECK(std::count(block_of.begin(), block_of.end(), -1) == 0);
      // The first items are the blocks' own; fixed turns would give the next ones out again.
      for (int64_t k = 0; k < std::min<int64_t>(grid, o.items); ++k) CHECK(block_of[k] == k);
      CHECK(next_in_turn(0, grid) == next_from_queue(0, grid));
    }
}

TEST_CASE("persistent turns balance equal tiles, and causal tiles are balanced better dispatched") {
  // ANCHORS.md's shapes: hidden 2048 (H = 2048 / d), B = 16384 / N, N = 1024 .. 16384.
  for (int64_t d : {64, 128})
    for (int64_t n : {1024, 2048, 4096, 8192, 16384}) {
      const Shape s{16384 / n, 2048 / d, 2048 / d, n, n, d};
      const TileOrder plain = order_of(s, false), causal = order_of(s, true);
      INFO("d=", d, " N=", n, " items=", plain.items);
      // Equal tiles: the busiest block has at most one item more than the mean.
      const double items_per_block = double(plain.items) / kH200Sms;
      CHECK(busiest_in_turns(plain, kH200Sms, false) <=
            (std::ceil(items_per_block) / items_per_block) + 1e-12);
      // Causal: fixed turns leave the busiest block further above the mean than dispatch.
      const double turns = busiest_in_turns(causal, kH200Sms, true);
      const double dispatch = busiest_in_order(causal, kH200Sms, true);
      INFO("causal, busiest over mean: turns ", turns, ", dispatched ", dispatch);
      CHECK(turns > dispatch);
      CHECK(dispatch < 1.07);
      // The work queue with one block per SM, run as the kernel runs it (the next item
      // claimed `stages` tiles early, d's default): as even as dispatch at these shapes, to
      // within half a percent of the mean (at d = 64, N = 1024, four stages: 1.0044 against
      // dispatch's 1.0071).
      double queue = 0;
      run_queue(causal, kH200Sms, true, default_stages(d), &queue);
      INFO("work queue ", queue);
      CHECK(std::abs(queue - dispatch) < 0.005);
      CHECK(queue < turns);
    }
}

TEST_CASE("a causal item's KV tiles when Br is not Bc: up to its last row's diagonal") {
  // d = 64: three consumer warpgroups, Br = 192 rows against Bc = 128 keys. N = 1024: query
  // tiles of rows [0, 192), [192, 384), ..., [960, 1024) (the last one partly empty) reach
  // keys 192, 384, 576, 768, 960 and 1024: ceil(those / 128) KV tiles, at most the 8 there are.
  REQUIRE(br(64) == 192);
  REQUIRE(kBc == 128);
  const TileOrder o = order_of(Shape{1, 1, 1, 1024, 1024, 64}, true);
  REQUIRE(o.tiles == 6);
  REQUIRE(o.kv_tiles == 8);
  const int64_t by_hand[6] = {2, 3, 5, 6, 8, 8};
  for (int64_t w = 0; w < o.items; ++w) {
    const int tile = work_item(o, w).tile;
    CAPTURE(tile);
    CHECK(item_kv_tiles(o, w, true) == by_hand[tile]);
    CHECK(item_kv_tiles(o, w, false) == 8);
  }
  // Where Br = Bc (d = 128) it is the tile's index + 1.
  const TileOrder square = order_of(Shape{1, 1, 1, 1000, 1000, 128}, true);
  REQUIRE(square.tiles == 8);
  for (int64_t w = 0; w < square.items; ++w)
    CHECK(item_kv_tiles(square, w, true) == work_item(square, w).tile + 1);
}

}  // namespace
}  // namespace flashlab::gpu::fa3

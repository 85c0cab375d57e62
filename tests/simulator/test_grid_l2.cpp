// The grid through one shared L2 (flashlab/sim/grid.hpp): a hand-worked small grid event by
// event, waves in grid order, the closed forms of the header, grouping that changes no
// count, and the L2 crossover against a brute-force run of the model.
#include "grid_events.hpp"
#include "helpers.hpp"

#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/simulate.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <utility>
#include <string>
#include <vector>

namespace flashlab::sim::test {

namespace {

// 2 SMs, one block each, 2 heads of N = 16 in tiles of 8 rows: 4 blocks in 2 waves. With
// d = 16 in bf16 a row is 32 bytes, one sector: a Q, K, V or O tile is 256 bytes and an L
// tile (8 fp32) 32 bytes. The L2 holds 1024 bytes: four K/V tiles.
GridProblem small_grid() {
  return {.N = 16,
          .d = 16,
          .dtype = DType::bf16,
          .heads = 2,
          .Br = 8,
          .Bc = 8,
          .blocks_per_sm = 1,
          .sm_count = 2,
          .l2_bytes = 1024};
}

Bytes sum_dirty(const GridReport& r, int t) { return r.dirty_at_end.at(t); }

}  // namespace

TEST_CASE("grid L2: a hand-worked grid of 2 SMs and 4 blocks, event by event") {
  const std::vector<std::string> expected = {
      // wave 0: blocks 0 and 1 (head 0, query tiles 0 and 1) load Q_0 and Q_1
      "miss Q 0 256", "miss Q 8 256",
      // KV step 0: block 0 misses K_0 and V_0 and fills the L2; block 1 hits them
      "miss K 0 256", "miss V 0 256", "hit K 0 256", "hit V 0 256",
      // KV step 1: K_1 and V_1 evict the least recently used, Q_0 then Q_1 (clean)
      "evict Q 0 256", "miss K 8 256", "evict Q 8 256", "miss V 8 256", "hit K 8 256",
      "hit V 8 256",
      // the wave ends: O_0 is allocated dirty (K_0 goes), L_0 pushes V_0 out; O_1 pushes K_1
      "evict K 0 256", "allocate O 0 256", "evict V 0 256", "allocate L 0 32", "evict K 8 256",
      "allocate O 8 256", "allocate L 8 32",
      // wave 1: blocks 2 and 3 (head 1, rows 16 on); Q_3 pushes the dirty O_0 to DRAM
      "evict V 8 256", "miss Q 16 256", "write-back O 0 256", "miss Q 24 256",
      // KV step 0 of head 1: L_0 and O_1 written back, then L_1
      "write-back L 0 32", "write-back O 8 256", "miss K 16 256", "write-back L 8 32",
      "miss V 16 256", "hit K 16 256", "hit V 16 256",
      // KV step 1
      "evict Q 16 256", "miss K 24 256", "evict Q 24 256", "miss V 24 256", "hit K 24 256",
      "hit V 24 256",
      // the wave ends; its O and L stay dirty in the L2
      "evict K 16 256", "allocate O 16 256", "evict V 16 256", "allocate L 16 32", "evict K 24 256",
      "allocate O 24 256", "allocate L 24 32"};
  CHECK(events_of(small_grid()) == expected);

  const GridReport r = run_grid(small_grid());
  CHECK(r.resident_blocks == 2);
  CHECK(r.steps == 4);  // 2 waves of Tc = 2 KV steps
  CHECK(r.tensor("Q").read == 4 * 256);
  CHECK(r.tensor("K").read == 4 * 2 * 256);   // every block loads both K tiles of its head
  CHECK(r.tensor("K").dram_read == 4 * 256);  // each K tile once from DRAM
  CHECK(r.tensor("V").dram_read == 4 * 256);
  CHECK(r.tensor("O").dram_written == 2 * 256);  // wave 0's O, evicted during the grid
  CHECK(r.tensor("L").dram_written == 2 * 32);
  CHECK(sum_dirty(r, 3) == 2 * 256);  // wave 1's O and L are left dirty at the end
  CHECK(sum_dirty(r, 4) == 2 * 32);
  CHECK(r.left_dirty() == 576);
  CHECK(r.dram_written() + r.left_dirty() == r.sm_written());  // all of O and L, once
}

TEST_CASE("grid L2: blocks start in grid order as slots free, and causal runs the longest first") {
  GridProblem p = small_grid();
  p.l2_bytes = Bytes{1} << 20;  // no evictions: only the order matters here
  p.causal = cpu::Causal::top_left;
  const auto events = events_of(p);
  const auto at = [&](const std::string& e) {
    const auto it = std::find(events.begin(), events.end(), e);
    REQUIRE(it != events.end());
    return it - events.begin();
  };
  // Block 0 runs query tile 1 (two KV tiles), block 1 query tile 0 (one). Block 1 ends after
  // one step and block 2 (head 1, query tile 1) takes its slot while block 0 still runs.
  CHECK(at("miss Q 8 256") < at("miss Q 0 256"));
  CHECK(at("allocate O 0 256") < at("miss Q 24 256"));
  CHECK(at("miss Q 24 256") < at("miss K 8 256"));  // before block 0's second KV step
  CHECK(at("allocate O 8 256") < at("miss Q 16 256"));
  const GridReport r = run_grid(p);
  CHECK(r.tensor("K").read == 2 * (2 + 1) * 256);  // per head: 2 + 1 KV tiles
  CHECK(r.tensor("K").dram_read == 4 * 256);
}

TEST_CASE("grid L2: N_q != N under the bottom-right mask, event by event") {
  // d = 16 in bf16: a row is 32 bytes, one sector. Tiles of 2 rows (64 bytes) and 2 keys; an L2
  // that holds everything; one SM holding both first blocks.
  GridProblem p{.N = 5,
                .N_q = 3,
                .d = 16,
                .causal = cpu::Causal::bottom_right,
                .Br = 2,
                .Bc = 2,
                .blocks_per_sm = 2,
                .sm_count = 1,
                .l2_bytes = Bytes{1} << 20};
  // Offset 2: block 0 runs query tile 1 (row 2, keys 0..4: three KV tiles), block 1 query
  // tile 0 (rows 0 and 1, keys 0..3: two). Block 1 ends after its second step.
  CHECK(events_of(p) == std::vector<std::string>{
                            "miss Q 2 32", "miss Q 0 64",                              // starts
                            "miss K 0 64", "miss V 0 64", "hit K 0 64", "hit V 0 64",  // step 0
                            "miss K 2 64", "miss V 2 64", "hit K 2 64", "hit V 2 64",  // step 1
                            "allocate O 0 64", "allocate L 0 32",  // block 1 ends
                            "miss K 4 32", "miss V 4 32",          // block 0's step 2
                            "allocate O 2 32", "allocate L 2 32"});
  // N_q > N: offset -2, and query tile 0 (rows 0, 1) sees no key. Its block (the last, under
  // the mask) loads Q and writes O and L (zeros, and -inf) without a step, as the kernels do.
  p.N = 3;
  p.N_q = 5;
  CHECK(events_of(p) ==
        std::vector<std::string>{"miss Q 4 32", "miss Q 2 64",  // blocks 0 and 1: tiles 2 and 1
                                 "miss K 0 64", "miss V 0 64", "hit K 0 64", "hit V 0 64",
                                 "allocate O 2 64", "allocate L 2 32",  // block 1: one step
                                 // block 2 takes its slot, and ends as it starts: no step
                                 "miss Q 0 64", "allocate O 0 64", "allocate L 0 32", "miss K 2 32",
                                 "miss V 2 32",                           // block 0's step 1
                                 "allocate O 4 32", "allocate L 4 32"});  // block 0 ends
  CHECK(run_grid(p).steps == 2);
}

TEST_CASE("grid L2: N_q != N: into the SMs, the fa2 program's count, and from DRAM what is seen") {
  // Every block's moves against the fa2 program run on one head (the paper's Algorithm 1 order
  // of the kernels as built), both alignments and none, N_q above and below N; in an L2
  // that holds everything, each input row a block loads read once from DRAM.
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> tile(1, 4);
  for (const Index n_q : {1, 17, 97, 300})
    for (const Index n : {1, 13, 97, 200})
      for (const auto causal :
           {cpu::Causal::none, cpu::Causal::top_left, cpu::Causal::bottom_right}) {
        const Index Br = 16 * tile(rng), Bc = 16 * tile(rng), heads = tile(rng);
        const GridProblem g{.N = n,
                            .N_q = n_q,
                            .d = 16,
                            .heads = heads,
                            .causal = causal,
                            .Br = Br,
                            .Bc = Bc,
                            .sm_count = 3,
                            .l2_bytes = Bytes{1} << 30};
        CAPTURE(n_q);
        CAPTURE(n);
        CAPTURE(cpu::to_string(causal));
        CAPTURE(Br);
        CAPTURE(Bc);
        CAPTURE(heads);
        const GridReport r = run_grid(g);
        const Report one =
            count(Algorithm::fa2,
                  {.N = n, .N_q = n_q, .d = 16, .causal = causal, .tiles = cpu::TileSizes{Br, Bc}});
        for (const char* t : {"Q", "K", "V", "O", "L"}) {
          CAPTURE(t);
          CHECK(r.tensor(t).read == heads * one.tensor(t).read);
          CHECK(r.tensor(t).written == heads * one.tensor(t).written);
        }
        // The keys the grid's blocks load at all: those of the longest query tile's steps
        // (the last tile's, under the mask), 32 bytes a row.
        const cpu::Mask mask{causal, n_q, n};
        const Index last_row = n_q - 1,
                    seen = causal == cpu::Causal::none
                               ? n
                               : std::clamp<Index>(last_row + mask.diagonal_offset() + 1, 0, n);
        const Index loaded = std::min(n, ceil_div(seen, Bc) * Bc);
        CHECK(r.tensor("K").dram_read == heads * loaded * 32);
        CHECK(r.tensor("Q").dram_read == heads * n_q * 32);
        CHECK(r.dram_written() == 0);
      }
}

TEST_CASE("grid L2: the header's closed forms, into the SMs and through a large L2") {
  auto rng = fresh_rng();
  for (const Index N : {1, 17, 97, 113, 1023}) {
    for (const Index heads : {1, 3, 8}) {
      const Index d = std::uniform_int_distribution<Index>(1, 4)(rng) * 16;
      GridProblem p{.N = N,
                    .d = d,
                    .heads = heads,
                    .Br = 32,
                    .Bc = 16,
                    .sm_count = 3,
                    .l2_bytes = Bytes{1} << 40};
      CAPTURE(N);
      CAPTURE(heads);
      CAPTURE(d);
      const GridReport r = run_grid(p);
      const Bytes s = 2, tensor = N * d * s;
      const Index Tr = ceil_div(N, 32);
      CHECK(r.tensor("Q").read == heads * tensor);
      CHECK(r.tensor("K").read == heads * Tr * tensor);
      CHECK(r.tensor("V").read == heads * Tr * tensor);
      CHECK(r.tensor("O").written == heads * tensor);
      CHECK(r.tensor("L").written == heads * N * 4);
      // Everything fits: each input read from DRAM once (in whole sectors: d s = 32 k bytes
      // per row, so nothing to round), nothing written during the grid.
      CHECK(r.tensor("K").dram_read == heads * tensor);
      CHECK(r.dram_read() == 3 * heads * tensor);
      CHECK(r.dram_written() == 0);
      CHECK(r.tensor("O").dram_written + r.dirty_at_end[3] == heads * tensor);
      // L's rows are 4 bytes: each tile is the sectors its bytes touch (grid.hpp).
      Bytes L_sectors = 0;
      for (Index row0 = 0; row0 < heads * N; row0 += std::min<Index>(32, N - row0 % N))
        L_sectors += ceil_div(4 * (row0 + std::min<Index>(32, N - row0 % N)), kSectorBytes) -
                     4 * row0 / kSectorBytes;
      CHECK(r.dirty_at_end[4] == L_sectors * kSectorBytes);
      CHECK(r.resident_blocks == std::min<Index>(heads * Tr, 6));
    }
  }
}

TEST_CASE("grid L2: a tile shorter than a sector costs a whole sector at DRAM") {
  // d = 5 in bf16: rows of 10 bytes. The first K tile (rows 0 to 15, bytes 0 to 160) is
  // sectors 0 to 4, exactly its 160 bytes; the ragged last tile of N = 17 (row 16, bytes 160
  // to 170) has a sector of its own, 32 bytes at DRAM for its 10.
  GridProblem p{.N = 17, .d = 5, .heads = 1, .Br = 32, .Bc = 16, .l2_bytes = Bytes{1} << 20};
  const GridReport r = run_grid(p);
  CHECK(r.tensor("K").read == 17 * 10);
  CHECK(r.tensor("K").dram_read == 160 + 32);
}

TEST_CASE("grid L2: K and V of a head re-read by each wave miss once they outgrow the L2") {
  // One head of N = 64, Br = 8: 8 blocks, 2 resident: 4 waves each sweeping K and V (2 KiB
  // each, rows of 32 bytes) from the start.
  GridProblem p{.N = 64, .d = 16, .heads = 1, .Br = 8, .Bc = 8, .blocks_per_sm = 1, .sm_count = 2};
  const Bytes K = 64 * 32;
  p.l2_bytes = K;  // K and V together are twice the L2: LRU keeps none of them a whole wave
  CHECK(run_grid(p).tensor("K").dram_read == 4 * K);
  // Room for K, V and a wave's Q, O and L tiles (the closed form's live bytes): once only.
  p.l2_bytes = live_bytes(p);
  CHECK(reread_heads(p) == 1);
  CHECK(p.l2_bytes == 2 * K + 2 * (8 * 32 * 2 + 8 * 4));
  CHECK(run_grid(p).tensor("K").dram_read == K);
}

TEST_CASE("grid L2: two partitions, a hand-worked grid: a tile read from both sides is in both") {
  // One head of N = 16 in tiles of 8 rows of 32 bytes (d = 16, bf16): blocks 0 and 1, one
  // on each of 2 SMs, block b on partition b mod 2. The L2 is two partitions of 1024 bytes
  // (four 256-byte tiles each).
  GridProblem p = small_grid();
  p.heads = 1;
  p.l2_bytes = 2048;
  p.l2_partitions = 2;
  std::vector<std::string> events;
  run_grid(p, [&](const L2Event& e) {
    events.push_back(fmt::format("{} {} {} {} @{}", to_string(e.kind), kGridTensorNames[e.tensor],
                                 e.row0, e.bytes, e.partition));
  });
  const std::vector<std::string> expected = {
      // each block's Q tile goes to its own partition only
      "miss Q 0 256 @0", "miss Q 8 256 @1",
      // KV step 0: block 0 reads K_0 and V_0 from DRAM into partition 0; block 1 misses in
      // partition 1 and copies them across: a second copy, no DRAM read
      "miss K 0 256 @0", "miss V 0 256 @0", "copy K 0 256 @1", "copy V 0 256 @1",
      // KV step 1: partition 0 holds Q_0, K_0, V_0 and now K_1 (full); V_1 evicts Q_0
      "miss K 8 256 @0", "evict Q 0 256 @0", "miss V 8 256 @0", "copy K 8 256 @1",
      "evict Q 8 256 @1", "copy V 8 256 @1",
      // the blocks end: O and L go to the writer's partition alone
      "evict K 0 256 @0", "allocate O 0 256 @0", "evict V 0 256 @0", "allocate L 0 32 @0",
      "evict K 0 256 @1", "allocate O 8 256 @1", "evict V 0 256 @1", "allocate L 8 32 @1"};
  CHECK(events == expected);
  const GridReport r = run_grid(p);
  CHECK(r.tensor("K").read == 2 * 2 * 256);   // both blocks load both K tiles
  CHECK(r.tensor("K").dram_read == 2 * 256);  // each K tile once from DRAM
  CHECK(r.tensor("Q").dram_read == 2 * 256);
  CHECK(r.dram_written() == 0);
  CHECK(r.left_dirty() == 2 * (256 + 32));
}

TEST_CASE("grid L2: with two partitions K and V must fit in one, as they are held in both") {
  // The grid of the test above, with four waves: one head of N = 64, Br = 8, 2 resident
  // blocks (one per partition). Each partition holds the head's K and V whole and its own
  // block's Q, O and L tiles: live_bytes with ceil(R / P) = 1 block.
  GridProblem p{.N = 64, .d = 16, .heads = 1, .Br = 8, .Bc = 8, .blocks_per_sm = 1, .sm_count = 2};
  const Bytes K = 64 * 32, block_tiles = 8 * 32 * 2 + 8 * 4;
  p.l2_partitions = 2;
  CHECK(live_bytes(p) == 2 * K + block_tiles);
  p.l2_bytes = 2 * live_bytes(p);  // each partition has exactly room: K and V read once
  CHECK(run_grid(p).tensor("K").dram_read == K);
  // The room one pool of L2 needs (2 K + 2 blocks' tiles), split in two: each half is
  // short of K and V, and every wave reads them again from DRAM.
  p.l2_bytes = 2 * K + 2 * block_tiles;
  CHECK(run_grid(p).tensor("K").dram_read == 4 * K);
  p.l2_partitions = 1;
  CHECK(run_grid(p).tensor("K").dram_read == K);
}

TEST_CASE("grid L2: booking blocks that run alike as one group changes no count") {
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 40; ++trial) {
    GridProblem p = random_small_grid(rng, {1, 17, 97, 113, 200});
    const Index N = p.N;
    CAPTURE(N);
    CAPTURE(p.d);
    CAPTURE(p.heads);
    CAPTURE(p.kv_heads);
    CAPTURE(p.Br);
    CAPTURE(p.Bc);
    CAPTURE(p.blocks_per_sm);
    CAPTURE(p.sm_count);
    CAPTURE(p.l2_bytes);
    CAPTURE(p.l2_partitions);
    CAPTURE(p.causal);
    check_grouping_changes_no_count(p);
  }
}

namespace {

// Small grids for the crossover's brute force: R = 4 blocks resident (2 SMs, 2 each), tiles
// of 8 and 4 rows of 32 bytes (d = 16, bf16), an L2 of a few KiB a partition.
GridProblem small_crossover_grid(Index heads, Bytes l2_per_partition, Index partitions,
                                 std::vector<Index> placement = {}) {
  return {.N = 0,
          .d = 16,
          .heads = heads,
          .Br = 8,
          .Bc = 4,
          .blocks_per_sm = 2,
          .sm_count = 2,
          .l2_bytes = l2_per_partition * partitions,
          .l2_partitions = partitions,
          .slot_partitions = std::move(placement)};
}

// The brute force: the grid run at every N (a multiple of Bc) up to 4096, the first at which
// K is read from DRAM more than once (0: none).
Index first_K_reread(GridProblem p) {
  for (p.N = p.Bc; p.N <= 4096; p.N += p.Bc)
    if (run_grid(p).tensor("K").dram_read > p.heads * p.N * 32) return p.N;
  return 0;
}

}  // namespace

TEST_CASE("grid L2: the crossover's closed form against a brute-force run of the model") {
  for (const Index heads : {1, 2, 3, 5}) {
    for (const Bytes l2 : {Bytes{3} * kKiB, Bytes{6} * kKiB}) {
      for (const Index partitions : {1, 2}) {
        const GridProblem p = small_crossover_grid(heads, l2, partitions);
        CAPTURE(heads);
        CAPTURE(l2);
        CAPTURE(partitions);
        const auto crossover = l2_crossover(p);
        REQUIRE(crossover);
        const Index brute = first_K_reread(p);
        REQUIRE(brute > 0);
        // The closed form counts whole heads of K and V between a tile's two reads, the tile
        // itself included, as LRU needs them to fit; at these sizes it finds the same N.
        CHECK(brute == crossover->first_N);
      }
    }
  }
}

// The closed form takes the grid's own placement (slot_partitions, as the measured one of a
// profile enters it through on_gpu). A tile that both sides read is held on both, and a side
// that loses it takes it back from the other: it is read from DRAM again only once every side
// that holds it has lost it, each side holding its own blocks' heads and tiles. With three of
// four slots on partition 0, on small grids of one to five heads, the brute force as above;
// one head's every-wave figure is its first.
TEST_CASE("grid L2: the crossover's closed form follows the grid's placement of blocks") {
  for (const Index heads : {1, 2, 3, 5}) {
    for (const Bytes l2 : {Bytes{3} * kKiB, Bytes{6} * kKiB}) {
      for (const auto& placement : {std::vector<Index>{0, 0, 0, 1}, std::vector<Index>{1, 0, 0, 0},
                                    std::vector<Index>{0, 1, 1, 1}}) {
        // R = 4 slots, block b in slot b mod 4
        const GridProblem p = small_crossover_grid(heads, l2, 2, placement);
        CAPTURE(heads);
        CAPTURE(l2);
        CAPTURE(placement[0]);
        CAPTURE(placement[1]);
        const auto crossover = l2_crossover(p);
        REQUIRE(crossover);
        CHECK(first_K_reread(p) == crossover->first_N);
        if (heads == 1) CHECK(crossover->one_head_N == crossover->first_N);
      }
    }
  }
}

// On the H200 as `flashlab compare` runs it (on_gpu: two partitions, the block placement
// measured at two blocks an SM), with LRU: the closed form and the model's own run first read
// K from DRAM again at the same N, for one head and for sixteen. Blocks alternating would put
// it at 49,088 and 7,488 (the tests below).
TEST_CASE("grid L2: the H200's crossover under its measured placement, closed form and model") {
  GridProblem p = on_gpu(find_profile("h200"),
                         {.d = 128, .heads = 1, .Br = 128, .Bc = 64, .blocks_per_sm = 2});
  REQUIRE_FALSE(p.slot_partitions.empty());
  p = with_replacement(find_profile("h200"), p, L2Replacement::lru);
  for (const auto& [heads, first] : {std::pair{Index{1}, Index{49664}}, {Index{16}, Index{8960}}}) {
    CAPTURE(heads);
    p.heads = heads;
    const auto c = l2_crossover(p);
    REQUIRE(c);
    CHECK(c->first_N == first);
    const auto K_reread = [&](Index N) {
      p.N = N;
      return run_grid(p).tensor("K").dram_read > heads * N * 128 * 2;
    };
    CHECK_FALSE(K_reread(first - 64));
    CHECK(K_reread(first));
  }
}

TEST_CASE("grid L2: the H200's crossover for fa2 at d = 128, by the closed form and the model") {
  GridProblem p{.d = 128,
                .heads = 16,
                .Br = 128,
                .Bc = 64,
                .blocks_per_sm = 2,
                .sm_count = 132,
                .l2_bytes = 60 * Bytes{1} << 20};
  const auto c = l2_crossover(p);
  REQUIRE(c);
  // live(N) = 2 N d s + (h - 1) 2 (N - Bc) d s + R (2 Br d s + 4 Br), R = 264: the wave's
  // tiles take 264 x 128 x 516 = 17,436,672 bytes, leaving 45,477,888 of the 60 MiB. With
  // three heads live (Tr = 232 < R, so some waves span three) 1536 N - 65,536 passes it
  // above N = 29,650.7: at 29,696, the next multiple of Bc = 64.
  CHECK(c->first_N == 29696);
  CHECK(c->heads_live == 3);
  CHECK(c->live == 512 * Bytes{29696} + 1024 * Bytes{29696 - 64} + 17436672);
  // One head: 512 N > 45,477,888 above N = 88,824, so from 88,832.
  CHECK(c->one_head_N == 88832);
  // The model agrees: K is read once at N = 29,632, and more at 29,696. Two heads live
  // (1024 N - 32,768 > 45,477,888) from 44,480 on: K once at 44,416, more at 44,480.
  const auto K_reread = [&](Index N) {
    p.N = N;
    return run_grid(p).tensor("K").dram_read > 16 * N * 128 * 2;
  };
  CHECK_FALSE(K_reread(29632));
  CHECK(K_reread(29696));
  CHECK_FALSE(K_reread(32768));  // Tr = 256: no wave spans three heads, two fit
  CHECK_FALSE(K_reread(44416));
  CHECK(K_reread(44480));
  // One head alone never has a wave of two: it starts at one_head_N.
  p.heads = 1;
  CHECK(l2_crossover(p)->first_N == 88832);
}

TEST_CASE(
    "grid L2: the H200's crossover in two partitions of 30 MiB, by the closed form and the model") {
  GridProblem p{.d = 128,
                .heads = 16,
                .Br = 128,
                .Bc = 64,
                .blocks_per_sm = 2,
                .sm_count = 132,
                .l2_bytes = 60 * Bytes{1} << 20,
                .l2_partitions = 2};
  const auto c = l2_crossover(p);
  REQUIRE(c);
  // Each partition holds the live heads' K and V and ceil(264 / 2) = 132 blocks' Q, O and L
  // tiles: 132 x 128 x 516 = 8,718,336 bytes, leaving 22,738,944 of its 31,457,280. At N =
  // 7488 (Tr = 59, so a wave of 264 blocks spans up to 6 heads) h = 6: 512 N + 5 x 512 (N -
  // 64) = 3072 N - 163,840 passes it above N = 7455.3.
  CHECK(c->first_N == 7488);
  CHECK(c->heads_live == 6);
  // Both partitions hold the shared head; the one that keeps it longest has the fewest tiles:
  // two of its wave's 132 blocks run a head's last query tile, of 64 rows (7488 = 58 x 128 +
  // 64), 128 rows fewer of O and L (516 bytes a row), and so does one more of the next wave's
  // blocks, 64 rows fewer of Q (256 bytes a row).
  CHECK(c->live ==
        512 * Bytes{7488} + 5 * 512 * Bytes{7488 - 64} + 8718336 - 128 * 516 - 64 * 256);
  // One head: 512 N > 22,738,944 above N = 44,412: from 44,416 (half the 88,832 of one pool).
  CHECK(c->one_head_N == 44416);
  const auto K_reread = [&](Index heads, Index N) {
    p.heads = heads, p.N = N;
    return run_grid(p).tensor("K").dram_read > heads * N * 128 * 2;
  };
  CHECK_FALSE(K_reread(16, 7424));
  CHECK(K_reread(16, 7488));
  CHECK(K_reread(16, 12288));
  // One head runs in two waves up to N = 67,584. The second is short of R: at N = 49,024
  // (Tr = 383) it has 119 blocks, 59 of them on partition 1, so less of its Q takes room
  // than in a full wave, and partition 1 keeps the head's K and V up to there: they reach
  // DRAM again one Bc later.
  p.heads = 1;
  CHECK(l2_crossover(p)->first_N == 49088);
  CHECK(l2_crossover(p)->one_head_N == 49088);
  const auto K_excess = [&](Index N) {
    p.N = N;
    return double(run_grid(p).tensor("K").dram_read) / double(N * 128 * 2) - 1;
  };
  CHECK(K_excess(32768) == 0);
  // The model's own run: below 0.1% of K read again at 49,024, then nearly all of K read a
  // second time at 49,088, where the closed form puts it.
  CHECK(K_excess(49024) < 0.001);
  CHECK(K_excess(49088) > 0.9);
  // The measured DRAM reads on the H200 (docs/IO-LEVELS.md): with one head, 24.0 MiB at N =
  // 32768 and 80.1 MiB at 65536. The model: Q, K and V once (24 MiB), then K and V read by
  // both waves (16 + 2 x 32 = 80 MiB); one pool of 60 MiB would read them once (48 MiB).
  p.N = 32768;
  CHECK(run_grid(p).dram_read() == 24 * (Bytes{1} << 20));
  p.N = 65536;
  CHECK(run_grid(p).dram_read() == 80 * (Bytes{1} << 20));
  p.l2_partitions = 1;
  CHECK(run_grid(p).dram_read() == 48 * (Bytes{1} << 20));
}

TEST_CASE("grid L2: a map of SM slots to partitions places the blocks, and b mod P given as one is the same run") {
  // The hand-worked grid of two partitions above: blocks 0 and 1 on slots 0 and 1.
  GridProblem p = small_grid();
  p.heads = 1;
  p.l2_bytes = 2048;
  p.l2_partitions = 2;
  const auto events_of = [](const GridProblem& q) {
    std::vector<std::string> events;
    run_grid(q, [&](const L2Event& e) {
      events.push_back(fmt::format("{} {} {} @{}", to_string(e.kind), kGridTensorNames[e.tensor],
                                   e.row0, e.partition));
    });
    return events;
  };
  const std::vector<std::string> alternate = events_of(p);
  GridProblem given = p;
  given.slot_partitions = {0, 1};
  CHECK(events_of(given) == alternate);
  // Both SMs on partition 0: block 1 finds K_j and V_j where block 0 put them (a hit, not a
  // copy), and nothing happens in partition 1.
  GridProblem one_side = p;
  one_side.slot_partitions = {0, 0};
  int copies = 0, hits = 0, elsewhere = 0;
  run_grid(one_side, [&](const L2Event& e) {
    copies += e.kind == L2EventKind::copy;
    hits += e.kind == L2EventKind::hit && (e.tensor == kK || e.tensor == kV);
    elsewhere += e.partition != 0;
  });
  CHECK(copies == 0);
  CHECK(hits == 4);  // K_0, V_0, K_1, V_1, each read again by block 1
  CHECK(elsewhere == 0);
  const GridReport r = run_grid(one_side);
  CHECK(r.tensor("K").read == 2 * 2 * 256);
  CHECK(r.tensor("K").dram_read == 2 * 256);
}

TEST_CASE("grid L2: a map of a first wave's slots places block b by b mod R") {
  // Two SMs of two blocks: R = 4 slots, blocks 0 to 7 (two heads of four query tiles). The
  // map puts slots 0 and 1 on partition 0, 2 and 3 on partition 1, so blocks 0, 1, 4, 5 read
  // through partition 0 and 2, 3, 6, 7 through partition 1; a map of the SMs alone (block b
  // on SM b mod 2) could not say this.
  GridProblem p = small_grid();
  p.N = 32;
  p.blocks_per_sm = 2;
  p.l2_bytes = 1 << 16;
  p.l2_partitions = 2;
  p.slot_partitions = {0, 0, 1, 1};
  for (Index b = 0; b < 8; ++b) CHECK(p.partition_of(b) == (b % 4 < 2 ? 0 : 1));
  std::vector<Index> q_partition(8, -1);
  run_grid(p, [&](const L2Event& e) {
    if (kGridTensorNames[e.tensor] == std::string_view("Q"))
      q_partition[std::size_t(e.row0 / p.Br)] = e.partition;
  });
  CHECK(q_partition == std::vector<Index>{0, 0, 1, 1, 0, 0, 1, 1});
  // Each head's K is read on both sides (blocks 0, 1 and 2, 3 for head 0): from DRAM once,
  // copied from one partition into the other, so DRAM reads both heads' K once each.
  const GridReport r = run_grid(p);
  CHECK(r.tensor("K").dram_read == 2 * 32 * 16 * 2);
}

TEST_CASE("grid L2: with any map of slots to partitions, booking blocks as groups changes no count") {
  // Groups whose first blocks share a partition (which b mod P never makes) load block by
  // block: the same counts as without grouping.
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick(0, 1 << 20);
  for (int trial = 0; trial < 40; ++trial) {
    GridProblem p = random_small_grid(rng, {1, 17, 97, 113, 200});
    // One entry an SM, or one a slot of the first wave.
    const Index slots = trial % 2 ? p.sm_count : p.sm_count * p.blocks_per_sm;
    p.slot_partitions.resize(static_cast<std::size_t>(slots));
    for (Index& part : p.slot_partitions) part = pick(rng) % p.l2_partitions;
    CAPTURE(p.N);
    CAPTURE(p.heads);
    CAPTURE(p.sm_count);
    CAPTURE(p.l2_partitions);
    CAPTURE(p.l2_bytes);
    check_grouping_changes_no_count(p);
  }
}

TEST_CASE("grid L2: scattered_partitions is balanced, the same for a seed, and checked") {
  for (const auto& [sms, parts] : {std::pair<Index, Index>{132, 2}, {7, 3}, {1, 1}, {5, 5}}) {
    const std::vector<Index> map = scattered_partitions(sms, parts, 7);
    REQUIRE(Index(map.size()) == sms);
    for (Index part = 0; part < parts; ++part) {
      const Index n = std::count(map.begin(), map.end(), part);
      CHECK(n == sms / parts + (part < sms % parts ? 1 : 0));
    }
    CHECK(scattered_partitions(sms, parts, 7) == map);
  }
  // Another seed, another order (132 slots in two halves: 2^132 / C(132, 66) to one against
  // the same map).
  CHECK(scattered_partitions(132, 2, 7) != scattered_partitions(132, 2, 8));
  std::vector<Index> alternating(132);
  for (Index s = 0; s < 132; ++s) alternating[std::size_t(s)] = s % 2;
  CHECK(scattered_partitions(132, 2, 7) != alternating);
  CHECK_THROWS_WITH_AS(scattered_partitions(4, 5, 0), doctest::Contains("5 partitions for 4 SMs"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(scattered_partitions(4, 0, 0), doctest::Contains("give 1 to the SM count"),
                       cpu::InvalidArgument);
}

TEST_CASE("grid L2: bad problems are refused with what would be right") {
  const auto refuses = [](GridProblem p, const char* words) {
    CAPTURE(words);
    CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains(words), cpu::InvalidArgument);
  };
  refuses({.N = 0}, "N = 0: give 1 to");
  refuses({.d = 0}, "d = 0: give 1 to");
  refuses({.heads = 6, .kv_heads = 4}, "kv_heads = 4 does not divide heads = 6");
  refuses({.heads = 2, .kv_heads = 3}, "kv_heads = 3: give 0 to 2");
  refuses({.Bc = 0}, "Bc = 0");
  refuses({.blocks_per_sm = 0}, "blocks_per_sm = 0");
  refuses({.sm_count = -1}, "sm_count = -1");
  refuses({.l2_bytes = 0}, "an L2 of 0 bytes");
  refuses({.l2_partitions = 0}, "l2_partitions = 0: give 1 to 64");
  refuses({.replacement = L2Replacement::sets, .l2_ways = 0}, "0 ways a set: give 1 to");
  // The ways are the profile's: on_gpu gives the grid what the profile says; a grid of other
  // ways than kL2Ways runs.
  for (const char* name : {"h100", "h200"})
    CHECK(on_gpu(find_profile(name), GridProblem{}).l2_ways == find_profile(name).l2_ways);
  GridProblem near_full = small_grid();
  near_full.replacement = L2Replacement::sets;
  near_full.l2_ways = 4;
  CHECK_NOTHROW(run_grid(near_full));
  refuses({.l2_bytes = 3, .l2_partitions = 4}, "a byte per partition");
  refuses({.causal = static_cast<cpu::Causal>(7)}, "causal");
  refuses({.N_q = -1}, "N_q = -1: give 0 to");
  refuses({.N_q = (cpu::Index{1} << 22) + 1}, "queries per head, 0 for as many as the keys");
  refuses({.causal = static_cast<cpu::Causal>(7)}, "");
  refuses({.sm_count = 2, .l2_partitions = 2, .slot_partitions = {0}},
          "slot_partitions has 1 entries for 2 SMs of 2 blocks each: give one partition for "
          "each SM (2) or for each slot of a first wave (4)");
  refuses({.blocks_per_sm = 3, .sm_count = 2, .l2_partitions = 2,
           .slot_partitions = {0, 1, 0, 1}},
          "slot_partitions has 4 entries for 2 SMs of 3 blocks each");
  refuses({.sm_count = 2, .l2_partitions = 2, .slot_partitions = {0, 2}},
          "slot_partitions[1] = 2: give a partition from 0 to l2_partitions - 1 = 1");
  CHECK_THROWS_AS(l2_crossover({.causal = cpu::Causal::top_left}), cpu::InvalidArgument);
  // A kernel's own order: every (head, query tile) to exactly one block.
  GridProblem ordered = small_grid();
  ordered.order = [](Index b) { return BlockTile{b % 2, 2}; };
  refuses(ordered, "gives block 0 head 0, query tile 2: give heads 0 to 1 and query tiles 0 to 1");
  ordered.order = [](Index b) { return BlockTile{0, b % 2}; };
  refuses(ordered, "gives head 0, query tile 0 to two blocks (the second is block 2)");
  ordered.order = [](Index b) { return BlockTile{b % 2, b / 2}; };
  CHECK_THROWS_WITH_AS(l2_crossover(ordered), doctest::Contains("for blocks in grid order"),
                       cpu::InvalidArgument);
}

TEST_CASE("grid L2: a kernel's own order, and the grid order given as one is the same run") {
  // Grid order spelt out (block b: head b / Tr, tile b % Tr, the last tile first under the
  // mask) gives the default run access for access, on random small grids.
  std::mt19937_64 rng = fresh_rng();
  for (int trial = 0; trial < 20; ++trial) {
    GridProblem p = random_small_grid(rng, {1, 17, 97, 113, 200});
    CAPTURE(p.N);
    const GridReport plain = run_grid(p);
    const Index Tr = p.query_tiles();
    const bool causal = p.causal != cpu::Causal::none;
    p.order = [Tr, causal](Index b) {
      return BlockTile{b / Tr, causal ? Tr - 1 - b % Tr : b % Tr};
    };
    const GridReport spelt = run_grid(p);
    CHECK(spelt.l2_accesses == plain.l2_accesses);
    CHECK(spelt.dram_read() == plain.dram_read());
    CHECK(spelt.dram_written() == plain.dram_written());
    CHECK(spelt.sm_written() == plain.sm_written());
  }
  // By hand, the small grid (2 heads of 2 query tiles, 2 SMs) with the heads alternating
  // block by block (block b: head b % 2, tile b / 2) and an L2 that holds everything: every
  // block still reads its head's whole K (16 rows of 32 bytes) and its own Q tile into the
  // SMs, and DRAM sees each byte of Q, K and V once.
  GridProblem p = small_grid();
  p.l2_bytes = 1 << 20;
  p.order = [](Index b) { return BlockTile{b % 2, b / 2}; };
  const GridReport r = run_grid(p);
  CHECK(r.tensor("K").read == 4 * 16 * 32);
  CHECK(r.tensor("Q").read == 4 * 8 * 32);
  CHECK(r.tensor("K").dram_read == 2 * 16 * 32);
  CHECK(r.tensor("Q").dram_read == 2 * 16 * 32);
  CHECK(r.tensor("O").written == 2 * 16 * 32);
}

}  // namespace flashlab::sim::test

// The backward's grids through the shared L2 (flashlab/sim/grid.hpp, "The backward's grids"):
// the main kernel's walk over its group's query tiles worked event by event, the reductions
// in one partition, the second wave's re-reads worked by hand, the grids against the
// backward mirror's counts and floor, and the mirror's launches run on a GPU's profile.
#include "grid_events.hpp"
#include "helpers.hpp"

#include "flashlab/sim/backward_kernel.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/profiles.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace flashlab::sim::test {

namespace {

// Each event as "kind tensor row0 bytes", the tensor by the report's name.
std::vector<std::string> named_events(const GridProblem& p) {
  std::vector<L2Event> events;
  const GridReport r = run_grid(p, [&](const L2Event& e) { events.push_back(e); });
  std::vector<std::string> out;
  for (const L2Event& e : events)
    out.push_back(fmt::format("{} {} {} {}", to_string(e.kind), r.tensors.at(e.tensor).name, e.row0,
                              e.bytes));
  return out;
}

// The events of one tensor, without it: "kind row0".
std::vector<std::string> tensor_events(const std::vector<std::string>& all,
                                       const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& e : all) {
    const auto space = e.find(' ');
    const std::string rest = e.substr(space + 1);
    if (rest.starts_with(name + " ")) {
      const std::string row_bytes = rest.substr(name.size() + 1);
      out.push_back(e.substr(0, space) + " " + row_bytes.substr(0, row_bytes.find(' ')));
    }
  }
  return out;
}

std::ptrdiff_t position(const std::vector<std::string>& events, const std::string& event) {
  const auto it = std::find(events.begin(), events.end(), event);
  REQUIRE_MESSAGE(it != events.end(), "no event " << event);
  return it - events.begin();
}

Bytes footprint(const std::vector<Footprint>& f) {
  Bytes total = 0;
  for (const Footprint& x : f) total += x.bytes;
  return total;
}

// One block of the main kernel (N = 4, one KV tile of 4 keys, two query tiles of 2 rows,
// d = 16 in bf16) on one SM, through an L2 of `l2_bytes`.
GridProblem one_block_grid(Bytes l2_bytes) {
  return {.pass = GridPass::backward_main,
          .N = 4,
          .d = 16,
          .Br = 2,
          .Bc = 4,
          .blocks_per_sm = 1,
          .sm_count = 1,
          .l2_bytes = l2_bytes};
}

}  // namespace

TEST_CASE("backward grid: the main kernel's causal walk over its GQA group, event by event") {
  // N = 8 in query tiles of 2 rows (Tr = 4) and KV tiles of 4 keys (Tc = 2), 2 query heads
  // over 1 KV head, d = 16 in bf16 (a row is one 32-byte sector), top-left: 2 blocks, one
  // wave. Block 0 (keys 0..3) is seen by query tiles 0..3: 4 steps a query head, 8 in all;
  // block 1 (keys 4..7) by tiles 2 and 3 only: 4 steps. An L2 that holds everything.
  const GridProblem p{.pass = GridPass::backward_main,
                      .N = 8,
                      .d = 16,
                      .heads = 2,
                      .kv_heads = 1,
                      .causal = cpu::Causal::top_left,
                      .Br = 2,
                      .Bc = 4,
                      .blocks_per_sm = 1,
                      .sm_count = 2,
                      .l2_bytes = 1 << 20};
  const std::vector<std::string> all = named_events(p);
  // Q of head h, tile i at row 8 h + 2 i: block 0 then block 1 at each step until block 1
  // ends after its fourth; the tiles block 1 read first are hits for block 0 two steps on.
  CHECK(tensor_events(all, "Q") ==
        std::vector<std::string>{"miss 0", "miss 4", "miss 2", "miss 6", "hit 4", "miss 12",
                                 "hit 6", "miss 14", "miss 8", "miss 10", "hit 12", "hit 14"});
  // Each reduction reads the accumulator's tile (from DRAM the first time) and writes it.
  CHECK(tensor_events(all, "dQ accumulator") ==
        std::vector<std::string>{"miss 0",  "hit 0",  "miss 4",  "hit 4",  "miss 2",  "hit 2",
                                 "miss 6",  "hit 6",  "hit 4",   "hit 4",  "miss 12", "hit 12",
                                 "hit 6",   "hit 6",  "miss 14", "hit 14", "miss 8",  "hit 8",
                                 "miss 10", "hit 10", "hit 12",  "hit 12", "hit 14",  "hit 14"});
  // K and V at each block's start; dK and dV at its end: block 1's after its fourth step's
  // reduction, before block 0 goes on to head 1's tile 0.
  CHECK(tensor_events(all, "K") == std::vector<std::string>{"miss 0", "miss 4"});
  CHECK(position(all, "allocate dK 4 128") > position(all, "miss dQ accumulator 14 128"));
  CHECK(position(all, "allocate dK 4 128") < position(all, "miss Q 8 64"));
  CHECK(position(all, "allocate dV 0 128") == std::ptrdiff_t(all.size()) - 1);
  // Into the SMs: the 12 steps' Q, dO, L and D; out: their reductions and dK, dV.
  const GridReport r = run_grid(p);
  CHECK(r.tensor("Q").read == 12 * 64);
  CHECK(r.tensor("L").read == 12 * 2 * 4);
  CHECK(r.tensor("dQ accumulator").written == 12 * 2 * 16 * 4);
  CHECK(r.tensor("dK").written == 8 * 32);
  CHECK(r.steps == 8);
  // From DRAM every tile once; nothing written while it ran; dK, dV and the accumulator left
  // dirty.
  CHECK(r.tensor("Q").dram_read == 2 * 8 * 32);
  CHECK(r.tensor("dQ accumulator").dram_read == 2 * 8 * 16 * 4);
  CHECK(r.dram_written() == 0);
  CHECK(r.left_dirty() == 2 * 8 * 32 + 2 * 8 * 16 * 4);
}

TEST_CASE("backward grid: an L2 of a few tiles, event by event: evictions, write-backs, the end") {
  // One block (N = 4, one KV tile of 4 keys, two query tiles of 2 rows), d = 16 in bf16, one
  // LRU L2 of 384 bytes. K and V tiles are 128 bytes, Q and dO 64, L and D 8 (one 32-byte
  // sector), the accumulator's 128 (2 rows of 16 floats).
  const GridProblem p = one_block_grid(384);
  // An access that needs room evicts the least recently used tiles first, then misses.
  const std::vector<std::string> expected = {
      // its start: K and V, 256 bytes held
      "miss K 0 128", "miss V 0 128",
      // step 0: Q_0 and dO_0 fill the 384 bytes; L_0 pushes K out (288), D_0 fits (320); the
      // accumulator's tile 0 is read, V making room, then written: dirty
      "miss Q 0 64", "miss dO 0 64", "evict K 0 128", "miss L 0 32", "miss D 0 32",
      "evict V 0 128", "miss dQ accumulator 0 128", "hit dQ accumulator 0 128",
      // step 1: Q_1 fits (384); dO_1 pushes Q_0 out, L_1 dO_0; D_1 fits; the accumulator's
      // tile 1 needs 128: L_0, D_0 and the dirty tile 0, written back (320 held after)
      "miss Q 2 64", "evict Q 0 64", "miss dO 2 64", "evict dO 0 64", "miss L 2 32",
      "miss D 2 32", "evict L 0 32", "evict D 0 32", "write-back dQ accumulator 0 128",
      "miss dQ accumulator 2 128", "hit dQ accumulator 2 128",
      // its end: dK pushes Q_1 out, dV dO_1, L_1 and D_1; the accumulator's tile 1, dK and
      // dV stay, dirty
      "evict Q 2 64", "allocate dK 0 128", "evict dO 2 64", "evict L 2 32", "evict D 2 32",
      "allocate dV 0 128"};
  CHECK(named_events(p) == expected);
  const GridReport r = run_grid(p);
  CHECK(r.dram_written() == 128);      // the accumulator's tile 0, while it ran
  CHECK(r.left_dirty() == 3 * 128);    // its tile 1, dK and dV, after
}

TEST_CASE("backward grid: reduced lines kept, in one set of 4 lines, worked by hand") {
  // The grid above in an L2 of one hashed set of 4 lines (512 bytes, sets policy): every tile
  // is one line. Plain LRU (window 1), oldest first: K V, then Q_0 dO_0; L_0 evicts K, D_0 V,
  // the accumulator's tile 0 Q_0: dO_0 L_0 D_0 A_0. Step 1: Q_1, dO_1, L_1 and D_1 evict
  // dO_0, L_0, D_0 and A_0, which is written back; A_1 evicts Q_1; dK and dV evict dO_1 and
  // L_1. With a window of 2 the step goes alike until D_1, where A_0 is the oldest, reduced
  // into, and Q_1 beside it is not: Q_1 goes; A_1 evicts dO_1, dK L_1, dV D_1. A_0 stays to
  // the end, dirty. The reads are the same: nothing is read twice.
  GridProblem p = one_block_grid(4 * kL2LineBytes);
  p.replacement = L2Replacement::sets;
  p.l2_ways = 4;
  const GridReport lru = run_grid(p);
  CHECK(lru.dram_written() == 128);    // A_0, while it ran
  CHECK(lru.left_dirty() == 3 * 128);  // A_1, dK, dV
  p.l2_reduced_window = 2;
  const GridReport kept = run_grid(p);
  CHECK(kept.dram_written() == 0);
  CHECK(kept.left_dirty() == 4 * 128);  // A_0, A_1, dK, dV
  CHECK(kept.dram_read() == lru.dram_read());
  // A window as wide as the set keeps them too; one wider, or any window but 1 outside the
  // sets policy, is refused.
  p.l2_reduced_window = 4;
  CHECK(run_grid(p).dram_written() == 0);
  p.l2_reduced_window = 5;
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("give 1 (plain LRU) to 4, the ways of a set"),
                       cpu::InvalidArgument);
  p.l2_reduced_window = 0;
  CHECK_THROWS_AS(run_grid(p), cpu::InvalidArgument);
  p.l2_reduced_window = 2;
  p.replacement = L2Replacement::lru;
  CHECK_THROWS_WITH_AS(run_grid(p), doctest::Contains("under the lru policy"),
                       cpu::InvalidArgument);
}

TEST_CASE("backward grid: a second wave reads its query tiles again when a sweep outgrows the L2") {
  // One head, N = 8 in tiles of 2 (Tr = Tc = 4), d = 16 bf16, no mask, 2 SMs of one block: 2
  // waves of 2 blocks, each sweeping query tiles 0..3. A step moves Q, dO (64 bytes each), L,
  // D (8 bytes each, in a 32-byte sector) and the accumulator's tile (128): 320 bytes; K and
  // V are 64 bytes a tile.
  GridProblem p{.pass = GridPass::backward_main,
                .N = 8,
                .d = 16,
                .Br = 2,
                .Bc = 2,
                .blocks_per_sm = 1,
                .sm_count = 2,
                .l2_bytes = 1 << 20};
  const Bytes sweep = 4 * 320, kv = 4 * 2 * 64;
  {
    // All of it fits: every tile once; the accumulator dirty once, and dK, dV.
    const GridReport r = run_grid(p);
    CHECK(r.dram_read() == sweep + kv);
    CHECK(r.dram_written() == 0);
    CHECK(r.left_dirty() == 4 * 128 + kv);
    CHECK(r.tensor("Q").read == 4 * 4 * 64);  // each block reads every Q tile
  }
  {
    // 400 bytes hold one step, not a sweep: the second wave's tiles were touched a whole
    // sweep ago, so each comes from DRAM again (the wave's second block still hits the first
    // block's, a step's 320 bytes back). The accumulator's tiles were written back before
    // the second wave reads them; written back or left dirty, each of its 8 dirty spells
    // and the 4 blocks' dK and dV reach DRAM once.
    p.l2_bytes = 400;
    const GridReport r = run_grid(p);
    CHECK(r.dram_read() == 2 * sweep + kv);
    CHECK(r.dram_written() + r.left_dirty() == 2 * 4 * 128 + kv);
    check_grouping_changes_no_count(p);
  }
}

TEST_CASE("backward grid: an accumulator tile's reductions meet in its first line's home") {
  // Blocks alternate partitions (b mod 2); the reductions of every block go to the one
  // partition that is the tile's home, so no line of it is dirty twice.
  const GridProblem p{.pass = GridPass::backward_main,
                      .N = 64,
                      .d = 32,
                      .heads = 4,
                      .kv_heads = 2,
                      .causal = cpu::Causal::top_left,
                      .Br = 8,
                      .Bc = 16,
                      .blocks_per_sm = 1,
                      .sm_count = 4,
                      .l2_bytes = 1 << 20,
                      .l2_partitions = 2,
                      .seed = 7};
  int accumulator = -1, q = -1;
  std::vector<L2Event> events;
  const GridReport r = run_grid(p, [&](const L2Event& e) { events.push_back(e); });
  for (std::size_t t = 0; t < r.tensors.size(); ++t) {
    if (r.tensors[t].name == "dQ accumulator") accumulator = int(t);
    if (r.tensors[t].name == "Q") q = int(t);
  }
  REQUIRE(accumulator >= 0);
  bool q_in_both[2] = {false, false};
  int reductions = 0;
  for (const L2Event& e : events) {
    if (e.tensor == q) q_in_both[e.partition] = true;
    if (e.tensor != accumulator) continue;
    ++reductions;
    CHECK(e.partition == l2_line_home(accumulator, e.row0, 0, p.seed, 2));
  }
  CHECK(q_in_both[0]);
  CHECK(q_in_both[1]);
  CHECK(reductions > 0);
  const Bytes accumulator_bytes = 4 * 64 * 32 * 4;
  CHECK(r.dirty_at_end.at(std::size_t(accumulator)) == accumulator_bytes);
  CHECK(r.tensor("dQ accumulator").dram_read == accumulator_bytes);
}

TEST_CASE(
    "backward grid: the pre- and post-kernels stream the rows of every head, block by block") {
  // 2 heads of N = 24 rows, d = 16 in bf16: 48 rows of the (head, row) array in blocks of 8,
  // 6 blocks. A block reads its rows of O and dO (256 bytes each) and writes D (8 floats, one
  // sector) and the accumulator's zeros (8 rows of 16 floats, 512 bytes).
  GridProblem p{.pass = GridPass::backward_pre,
                .N = 24,
                .d = 16,
                .heads = 2,
                .Br = 8,
                .blocks_per_sm = 2,
                .sm_count = 2,
                .l2_bytes = 1 << 20};
  CHECK(p.blocks() == 6);
  const std::vector<std::string> all = named_events(p);
  // A block takes no step: it reads its rows and writes its results as it starts, and the next
  // block takes its slot (the drift schedule's order, which the GPU's profile runs).
  const std::vector<std::string> first_blocks = {
      "miss O 0 256", "miss dO 0 256", "allocate D 0 32", "allocate dQ accumulator 0 512",
      "miss O 8 256", "miss dO 8 256", "allocate D 8 32", "allocate dQ accumulator 8 512"};
  REQUIRE(all.size() == 6 * 4);
  CHECK(std::vector<std::string>(all.begin(), all.begin() + 8) == first_blocks);
  const GridReport r = run_grid(p);
  CHECK(r.dram_read() == 2 * 48 * 32);
  CHECK(r.left_dirty() == 48 * 4 + 48 * 64);
  CHECK(r.steps == 0);  // no block takes a step
  // The deterministic mode's: D alone.
  p.pass = GridPass::backward_pre_deterministic;
  CHECK(run_grid(p).left_dirty() == 48 * 4);
  // The post-kernel: the accumulator in, dQ out.
  p.pass = GridPass::backward_post;
  const GridReport post = run_grid(p);
  CHECK(post.tensor("dQ accumulator").dram_read == 48 * 64);
  CHECK(post.tensor("dQ").written == 48 * 32);
  // 50 rows: the last block has 2.
  p.N = 25;
  CHECK(p.blocks() == 7);
  CHECK(run_grid(p).tensor("dQ").written == 50 * 32);
}

TEST_CASE("backward grid: in an L2 that holds everything, the mirror's floor and its SM bytes") {
  // Every tile once from DRAM is the floor of the mirror's launch, and every block's moves
  // are the mirror's bytes of that kernel, on shapes whose fp32 rows fill whole sectors
  // (N_q a multiple of 8: each head's L and D start on a sector). N_q != N_k under both
  // alignments: bottom-right with N_q > N_k leaves the first rows unseen by every key,
  // top-left with N_q < N_k the last keys unseen by every query (v3's main kernel, which
  // skips_unseen_kv, loads nothing there).
  const std::vector<std::pair<Index, Index>> shapes = {{8, 8},      {200, 200},  {1024, 1024},
                                                       {200, 1000}, {1024, 200}, {8, 300}};
  for (const auto& [n_q, n_k] : shapes)
    for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left, cpu::Causal::bottom_right})
      for (const int kernel : {0, 1, 2})  // atomic v2, atomic v3 (skips unseen KV), deterministic
        for (const Index kv_heads : {1, 2, 4}) {
          const bool deterministic = kernel == 2;
          const BackwardShape s{.batch = 2,
                                .heads_q = 4,
                                .heads_kv = kv_heads,
                                .n_q = n_q,
                                .n_k = n_k,
                                .d = 64,
                                .causal = causal};
          const BackwardKernelFacts f{.Br = 64,
                                      .Bc = 128,
                                      .deterministic = deterministic,
                                      .dq_Br = 64,
                                      .dq_Bc = 64,
                                      .dq_blocks_per_sm = 2,
                                      .pre_post_rows_per_block = 8,
                                      .pre_post_blocks_per_sm = 8,
                                      .skips_unseen_kv = kernel == 1};
          CAPTURE(n_q);
          CAPTURE(n_k);
          CAPTURE(cpu::to_string(causal));
          CAPTURE(kernel);
          CAPTURE(kv_heads);
          const PassReport m = count_backward_kernel(s, f);
          const Launch& main = m.launch("main");
          REQUIRE(main.grid);
          GridProblem g = *main.grid;
          g.sm_count = 8;
          g.l2_bytes = Bytes{1} << 30;
          const GridReport r = run_grid(g);
          CHECK(r.dram_read() == footprint(main.reads));
          CHECK(r.left_dirty() == footprint(main.writes));
          CHECK(r.dram_written() == 0);
          // The pre- and post-kernels too: every row once, the writes left dirty.
          for (const Launch& l : m.launches) {
            if (l.name == "main" || l.name == "dQ") continue;
            CAPTURE(l.name);
            REQUIRE(l.grid);
            GridProblem e = *l.grid;
            e.sm_count = 8;
            e.l2_bytes = Bytes{1} << 30;
            const GridReport x = run_grid(e);
            CHECK(x.dram_read() == footprint(l.reads));
            CHECK(x.left_dirty() == footprint(l.writes));
            CHECK(x.sm_read() == footprint(l.reads));
            CHECK(e.blocks() == l.blocks);
          }
          const Bytes b = 2, rows = 2 * 4 * n_q;  // B H_q N_q query rows
          CHECK(r.tensor("dO").read ==
                m.tensor("dO").read - rows * 64 * b - (deterministic ? rows * 64 * b : 0));
          if (!deterministic) {
            CHECK(r.tensor("Q").read == m.tensor("Q").read);
            CHECK(r.tensor("K").read == m.tensor("K").read);
            CHECK(r.tensor("L").read == m.tensor("L").read);
            CHECK(r.tensor("dQ accumulator").written ==
                  m.tensor("dQ accumulator").written - rows * 64 * 4);
            continue;
          }
          // The dQ kernel's grid: its own tiles, Q, dO, L, D a block, K and V a step, dQ.
          const Launch& dq = m.launch("dQ");
          REQUIRE(dq.grid);
          GridProblem h = *dq.grid;
          CHECK(h.pass == GridPass::backward_dq);
          CHECK(h.Bc == 64);
          CHECK(h.blocks_per_sm == 2);
          h.sm_count = 8;
          h.l2_bytes = Bytes{1} << 30;
          const GridReport d = run_grid(h);
          CHECK(d.dram_read() == footprint(dq.reads));
          CHECK(d.left_dirty() == footprint(dq.writes));
          CHECK(d.tensor("K").read + r.tensor("K").read == m.tensor("K").read);
          CHECK(d.tensor("Q").read + r.tensor("Q").read == m.tensor("Q").read);
          CHECK(d.tensor("dQ").written == m.tensor("dQ").written);
        }
}

TEST_CASE("backward grid: grouping blocks that walk alike changes no count") {
  std::mt19937_64 rng(20261204);
  const GridPass passes[] = {GridPass::backward_main, GridPass::backward_main_deterministic,
                             GridPass::backward_dq, GridPass::backward_pre,
                             GridPass::backward_post};
  for (int k = 0; k < 60; ++k) {
    GridProblem p = random_small_grid(rng, {1, 7, 17, 33, 64, 97, 100});
    p.pass = passes[k % 5];
    CAPTURE(to_string(p.pass));
    CAPTURE(p.N);
    CAPTURE(p.l2_bytes);
    check_grouping_changes_no_count(p);
  }
}

TEST_CASE("backward grid: the mirror's launches, on a GPU's profile") {
  const HardwareProfile& h200 = find_profile("h200");
  const BackwardShape s{.heads_q = 4,
                        .heads_kv = 2,
                        .n_q = 512,
                        .n_k = 512,
                        .d = 128,
                        .causal = cpu::Causal::bottom_right};
  const PassReport r = count_backward_kernel(s, {.Br = 64, .Bc = 128});
  const Launch& main = r.launch("main");
  REQUIRE(main.grid);
  CHECK(main.grid->pass == GridPass::backward_main);
  CHECK(main.grid->causal == cpu::Causal::bottom_right);
  CHECK(main.grid->diagonal_offset() == 0);  // N_q = N_k: top-left's mask
  CHECK(main.grid->heads == 4);
  CHECK(main.grid->kv_heads == 2);
  CHECK(main.grid->blocks() == main.blocks);
  CHECK_FALSE(r.launch("pre (D)").grid);
  // The main kernel's from its grid, the others' floors; on the H200 everything here fits.
  const auto dram = predicted_dram(r, h200);
  REQUIRE(dram);
  REQUIRE(dram->size() == 3);
  CHECK_FALSE((*dram)[0].from_grid);
  CHECK((*dram)[1].from_grid);
  CHECK_FALSE((*dram)[2].from_grid);
  const Bytes room = l2_dirty_room(h200);
  for (std::size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK((*dram)[k].read == compulsory_dram(r.launches[k], room).read);
  }
  // N_q != N_k: the main kernel's grid takes both, the keys as N and the mask's offset.
  BackwardShape other = s;
  other.n_q = 504;
  const PassReport o = count_backward_kernel(other, {.Br = 64, .Bc = 128});
  REQUIRE(o.launch("main").grid);
  CHECK(o.launch("main").grid->N == 512);
  CHECK(o.launch("main").grid->queries() == 504);
  CHECK(o.launch("main").grid->diagonal_offset() == 8);
  CHECK(o.launch("main").grid->blocks() == o.launch("main").blocks);
  const auto floors = predicted_dram(o, h200);
  REQUIRE(floors);
  CHECK((*floors)[1].from_grid);
  CHECK((*floors)[1].read == compulsory_dram(o.launches[1], room).read);
  // Where the facts say how many rows a pre- or post-kernel block takes, those launches have
  // grids too, of the query rows alone (so with N_q != N_k as well), in the mode's pass.
  const PassReport rows = count_backward_kernel(
      other, {.Br = 64, .Bc = 128, .pre_post_rows_per_block = 8, .pre_post_blocks_per_sm = 8});
  REQUIRE(rows.launch("pre (D)").grid);
  CHECK(rows.launch("pre (D)").grid->pass == GridPass::backward_pre);
  CHECK(rows.launch("pre (D)").grid->blocks() == rows.launch("pre (D)").blocks);
  CHECK(rows.launch("pre (D)").per_sm == 8);
  REQUIRE(rows.launch("post (dQ)").grid);
  CHECK(rows.launch("post (dQ)").grid->pass == GridPass::backward_post);
  const PassReport det = count_backward_kernel(
      s, {.Br = 64, .Bc = 128, .deterministic = true, .pre_post_rows_per_block = 8});
  CHECK(det.launch("pre (D)").grid->pass == GridPass::backward_pre_deterministic);
  // Run on the H200: its partitions and placement, older blocks first where K and V bypass
  // the L1.
  const GridProblem g = paced_on_gpu(h200, *main.grid);
  CHECK(g.l2_partitions == h200.l2_partitions);
  CHECK(g.schedule == GridSchedule::older_first);
  CHECK(g.older_block_lead == h200.older_block_lead);
  GridProblem through_l1{.l1_bytes = 4096};
  CHECK(paced_on_gpu(h200, through_l1).schedule == GridSchedule::lockstep);
}

TEST_CASE("backward grid: what a backward pass cannot take is refused with what would be right") {
  GridProblem p{.pass = GridPass::backward_main, .N = 64, .Br = 16, .Bc = 16};
  p.l1_bytes = 1024;
  CHECK(contains(message_of([&] { run_grid(p); }), "bypass the L1"));
  p.l1_bytes = 0;
  p.order = [](Index b) { return BlockTile{0, b}; };
  CHECK(contains(message_of([&] { run_grid(p); }), "takes its blocks in grid order"));
  p.order = {};
  CHECK(contains(message_of([&] { l2_crossover(p); }),
                 "run the backward_main pass through run_grid"));
  p.schedule = GridSchedule::logged;
  p.block_log = {{0, 0, 1}};
  CHECK(contains(message_of([&] { run_grid(p); }), "(1 KV heads x 4 KV tiles)"));
  p.pass = static_cast<GridPass>(9);
  CHECK(contains(message_of([&] { run_grid(p); }), "an unknown grid pass"));
}

}  // namespace flashlab::sim::test

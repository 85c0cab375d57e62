// fa3's switches (flashlab/fa3.h) change how the work is scheduled, never the result: every
// combination of warp specialisation, stages, ping-pong and intra-warpgroup overlap matches
// the fp64 reference on awkward shapes, on a grid of one block per tile and on a persistent
// grid whose blocks take several tiles each, and a switch out of range is refused with a
// message.
// FlashAttention-4's conditional rescaling changes the base each row's weights are taken
// against, not O or L: it matches the reference too, and the updates it counts on the
// device are the CPU reference's for the same inputs.
// FlashAttention-4's software exponential (software_exp2) changes how a share of W's
// elements is computed, within 1.04e-4 relative: it matches the reference on the same grid
// of shapes, is bitwise deterministic, and does change the output's bits (it runs).
#include "checks.hpp"

#include "flashlab/cpu/conditional_rescaling.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <iterator>
#include <string>
#include <vector>

namespace flashlab::gpu::test {
namespace {

// The library's default options, as a caller starts from them.
flashlab_fa3_options fa3_defaults() {
  flashlab_fa3_options o{};
  REQUIRE(flashlab_fa3_default_options(&o) == FLASHLAB_OK);
  return o;
}

flashlab_fa3_options conditional();

// Whether two runs wrote the same O and L, bit for bit.
bool same_bits(const RawRun& a, const RawRun& b) {
  return a.o == b.o && a.lse.size() == b.lse.size() &&
         std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0;
}

// A test's shape: batch, query and KV heads, N_q, N_k.
struct GridShape {
  int batch, heads_q, heads_kv, n_q, n_k;
};
// Fewer items than SMs (one tile; a ragged one), more items than SMs (with N_q != N_k both
// ways, and N_q > N_k where bottom-right rows see no key), MQA.
constexpr GridShape kGridShapes[] = {{1, 1, 1, 1, 1},       {1, 2, 1, 97, 113},
                                     {3, 16, 4, 300, 1023}, {2, 12, 3, 1100, 517},
                                     {4, 8, 8, 1023, 113},  {2, 16, 1, 700, 17}};

// fa3 on that shape with those options.
Case grid_case(const GridShape& s, flashlab_dtype dtype, int d, flashlab_causal causal,
               const flashlab_fa3_options& o) {
  Case c;
  c.kernel = FLASHLAB_KERNEL_FA3;
  c.dtype = dtype;
  c.batch = s.batch;
  c.heads_q = s.heads_q;
  c.heads_kv = s.heads_kv;
  c.n_q = s.n_q;
  c.n_k = s.n_k;
  c.d = d;
  c.causal = causal;
  c.fa3 = o;
  return c;
}

std::vector<flashlab_fa3_options> every_combination() {
  std::vector<flashlab_fa3_options> out;
  for (int ws : {0, 1})
    for (int stages = 1; stages <= fa3::max_stages(128, FLASHLAB_BF16); ++stages)
      for (int ping_pong : {0, 1})
        for (int overlap : {0, 1})
          out.push_back({ws, stages, ping_pong, overlap, /*conditional_rescale=*/0, nullptr,
                         FLASHLAB_FA3_GRID_PER_TILE, /*software_exp2=*/0,
                         /*overlap_items=*/1, /*kv_l2_share=*/FLASHLAB_FA3_AUTO});
  return out;
}

TEST_CASE("fa3: every switch combination matches the reference (bf16, d = 128)") {
  // (N_q, N_k): one tile, a ragged tile, several tiles with a ragged end, N_q != N_k.
  constexpr int kShapes[][2] = {{1, 1}, {97, 113}, {300, 1023}, {1023, 300}};
  constexpr flashlab_causal kModes[] = {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT,
                                        FLASHLAB_CAUSAL_BOTTOM_RIGHT};
  // Each combination on the same inputs, held to references computed once.
  for (const auto& shape : kShapes)
    for (flashlab_causal causal : kModes)
      expect_each_matches_reference(
          grid_case({2, 4, 2, shape[0], shape[1]}, FLASHLAB_BF16, 128, causal, {}),
          every_combination());
}

// A Case whose blocks, on a persistent grid, each take several work items: 4 x 8 (batch,
// head) pairs x 8 query tiles = 256 items, more than an H200's 132 SMs; GQA 8 / 2.
Case many_items(flashlab_causal causal, int d, const flashlab_fa3_options& o) {
  return grid_case({4, 8, 2, 1023, 300}, FLASHLAB_BF16, d, causal, o);
}

int sm_count() {
  int device = 0, sms = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess);
  return sms;
}

TEST_CASE("fa3: the persistent grid, every switch combination, more items than SMs") {
  const Case probe = many_items(FLASHLAB_CAUSAL_NONE, 128, {});
  const int64_t items =
      int64_t(probe.batch) * probe.heads_q * ((probe.n_q + fa3::br(probe.d) - 1) / fa3::br(probe.d));
  REQUIRE(items > sm_count());  // so that blocks run several items one after the other
  std::vector<flashlab_fa3_options> each;
  for (flashlab_fa3_options o : every_combination())
    // The work queue's items are taken by the producer warp: only with one.
    for (int grid : {FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_QUEUE}) {
      if (grid == FLASHLAB_FA3_GRID_QUEUE && o.warp_specialized == 0) continue;
      o.grid = grid;
      each.push_back(o);
    }
  // Causal bottom-right with N_q > N_k: the first rows see no key, so whole items have no KV
  // tile (Tc = 0) between items that have some.
  for (flashlab_causal causal :
       {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT, FLASHLAB_CAUSAL_BOTTOM_RIGHT})
    expect_each_matches_reference(many_items(causal, 128, {}), each);
}

TEST_CASE("fa3: the work queue is bitwise deterministic, whichever block takes an item") {
  // Which block runs which item changes from run to run; what an item computes does not.
  constexpr int kRuns = 20;
  for (int d : {64, 128}) {
    flashlab_fa3_options o = fa3_defaults();
    o.grid = FLASHLAB_FA3_GRID_QUEUE;
    const Case c = many_items(FLASHLAB_CAUSAL_TOP_LEFT, d, o);
    const uint64_t seed = fresh_seed();
    const auto runs = run_repeated(c, seed, kRuns);
    INFO(c.describe(), " seed=", seed);
    for (int r = 1; r < kRuns; ++r) CHECK(same_bits(runs[0], runs[r]));
  }
}

TEST_CASE("fa3: every grid at d = 64 and 128, bf16 and fp16, ragged causal shapes and GQA") {
  std::vector<flashlab_fa3_options> grids;
  for (int grid : {FLASHLAB_FA3_GRID_PER_TILE, FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_AUTO,
                   FLASHLAB_FA3_GRID_QUEUE}) {
    grids.push_back(fa3_defaults());
    grids.back().grid = grid;
  }
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128})
      for (const GridShape& s : kGridShapes)
        for (flashlab_causal causal :
             {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT, FLASHLAB_CAUSAL_BOTTOM_RIGHT})
          expect_each_matches_reference(grid_case(s, dtype, d, causal, {}), grids);
}

TEST_CASE("fa3: the persistent grid under the conditional rule, counting or not") {
  for (int grid : {FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_QUEUE})
    for (int d : {64, 128}) {
      flashlab_fa3_options o = conditional();
      o.grid = grid;
      Case c = many_items(FLASHLAB_CAUSAL_BOTTOM_RIGHT, d, o);
      c.scale = 1.0;
      expect_matches_reference(c);
      const RescaleCounts r = run_rescale_counts(c, fresh_seed());
      INFO(c.describe());
      CHECK(r.outcome.err <= r.outcome.bound);
      CHECK(r.gpu[FLASHLAB_RESCALE_FIRST] == r.cpu[FLASHLAB_RESCALE_FIRST]);
    }
}

TEST_CASE(
    "sanitizer: fa3's persistent grid, blocks taking several items (compute-sanitizer runs it)") {
  // 12 heads x 12 query tiles = 144 items, a few more than an H200's 132 SMs, so some blocks
  // take two items, the consumers running from one into the next or not (overlap_items:
  // the second Q buffer and its item slot); two KV tiles each, to keep the sanitizers' run
  // short, and none at all for the first rows under the bottom-right mask.
  // The work queue likewise: its counter, and the item slot the producer hands items in.
  std::vector<flashlab_fa3_options> each;
  for (int grid : {FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_QUEUE})
    for (int overlap_items : {0, 1}) {
      each.push_back(fa3_defaults());
      each.back().overlap_items = overlap_items;
      each.back().grid = grid;
    }
  for (int d : {64, 128})
    for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_BOTTOM_RIGHT})
      expect_each_matches_reference(grid_case({1, 12, 3, 1500, 203}, FLASHLAB_BF16, d, causal, {}),
                                    each);
}

// c checked against the reference; then its O and L, and those of c with `change` made to its
// fa3 options, on the same inputs (a fresh seed), checked equal to the bit.
template <class Change>
void expect_same_bits_when(Case c, Change change) {
  expect_matches_reference(c);
  const uint64_t seed = fresh_seed();
  const auto before = run_repeated(c, seed, 1);
  change(*c.fa3);
  const auto after = run_repeated(c, seed, 1);
  INFO(c.describe(), " seed=", seed);
  CHECK(same_bits(before[0], after[0]));
}

TEST_CASE("fa3: running across work items changes no bit (overlap_items, persistent and queue)") {
  // The consumers start an item under the last one's end or after it: every item computes
  // the same thing in the same order either way, so O and L must agree to the bit, at every
  // stage count (3 stages at d = 128 have one Q buffer and never run across), ping-pong on
  // and off, and where a consumer leaves out the KV tiles its rows do not see when items run
  // apart (d = 64, no ping-pong): such a tile would move no base, and alpha is exactly 1.
  // Shapes: 256 items of up to 3 KV tiles (under the top-left mask and none, blocks
  // run into items of one tile; under the bottom-right mask the later items have no KV tile
  // and blocks end apart), and 576 items of one KV tile each (blocks run through chains of
  // four and more items of one tile).
  constexpr GridShape kShapes[] = {{4, 8, 2, 1023, 300}, {4, 16, 4, 1100, 17}};
  for (int grid : {FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_QUEUE})
    for (int d : {64, 128})
      for (int stages = 1; stages <= fa3::max_stages(d, FLASHLAB_BF16); ++stages)
        for (int s = 0; s < 2; ++s)
          for (flashlab_causal causal :
               {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT, FLASHLAB_CAUSAL_BOTTOM_RIGHT}) {
            const GridShape& shape = kShapes[s];
            flashlab_fa3_options o = fa3_defaults();
            o.overlap_items = 1;
            o.grid = grid;
            o.stages = stages;
            o.ping_pong = (stages + s) % 2;  // each stage count with ping-pong on and off
            expect_same_bits_when(grid_case(shape, FLASHLAB_BF16, d, causal, o),
                                  [](flashlab_fa3_options& apart) { apart.overlap_items = 0; });
          }
}

TEST_CASE("fa3: the tile order's share of the L2 changes no bit (kv_l2_share, every grid)") {
  // The share sets how many (batch, head) pairs a section of the order takes, so which blocks
  // take which items and when; each item computes the same thing whoever takes it. On these
  // shapes (32 pairs each, GQA 8 over 2 and 16 over 4) 1% of an H100's or H200's L2 gives
  // sections of 2 to 32 pairs, with a partial one at most shapes, and 100% one section of all.
  constexpr GridShape kShapes[] = {{4, 8, 2, 1023, 300}, {2, 16, 4, 700, 1500}};
  for (int grid :
       {FLASHLAB_FA3_GRID_PER_TILE, FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_QUEUE})
    for (int d : {64, 128})
      for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_BOTTOM_RIGHT})
        for (const GridShape& shape : kShapes)
          for (int share : {1, 100}) {
            flashlab_fa3_options o = fa3_defaults();
            o.grid = grid;
            expect_same_bits_when(grid_case(shape, FLASHLAB_BF16, d, causal, o),
                                  [share](flashlab_fa3_options& s) { s.kv_l2_share = share; });
          }
}

TEST_CASE("fa3: flashlab_forward runs the options FLASHLAB_FA3_AUTO resolves to, bit for bit") {
  for (int d : {64, 128}) {
    flashlab_fa3_options resolved{};
    const flashlab_fa3_options defaults = fa3_defaults();
    REQUIRE(flashlab_fa3_resolve_options(d, &defaults, &resolved) == FLASHLAB_OK);
    Case c = grid_case({2, 4, 2, 1023, 1023}, FLASHLAB_BF16, d, FLASHLAB_CAUSAL_TOP_LEFT,
                       resolved);
    expect_matches_reference(c);
    const uint64_t seed = fresh_seed();
    const auto explicit_options = run_repeated(c, seed, 1);
    c.fa3.reset();  // flashlab_forward: the library's defaults
    const auto by_default = run_repeated(c, seed, 1);
    INFO(c.describe(), " seed=", seed);
    CHECK(same_bits(explicit_options[0], by_default[0]));
  }
}

TEST_CASE("fa3: ping-pong changes no bit at d = 64 (consumers computing every tile or their own)") {
  // Ping-pong only orders when each consumer issues its matmuls; with it off, a consumer also
  // computes only the KV tiles its own rows see (fa3::skips_unseen_tiles; with it on, every
  // tile of the item). A tile a row does not see is wholly masked for it: W = 0, the base
  // stays and alpha is exactly 1, so O and L must agree to the bit; with items apart and
  // running across (where every consumer computes every tile either way). Shapes: diagonal
  // items under both masks, a head's last query tile with consumers that have no row
  // (N_q = 1024, 577, 97), rows that see no key at all (bottom-right, N_q > N_k), GQA.
  constexpr GridShape kShapes[] = {{2, 4, 2, 1024, 1024}, {1, 3, 1, 577, 1300}, {3, 2, 2, 97, 97},
                                   {1, 2, 1, 700, 250}};
  REQUIRE(fa3::skips_unseen_tiles(64));
  for (const GridShape& shape : kShapes)
    for (flashlab_causal causal :
         {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT, FLASHLAB_CAUSAL_BOTTOM_RIGHT})
      for (int stages : {2, 3})
        for (int overlap_items : {0, 1}) {
          flashlab_fa3_options o = fa3_defaults();
          o.stages = stages;
          o.ping_pong = 0;
          o.overlap_items = overlap_items;
          expect_same_bits_when(grid_case(shape, FLASHLAB_BF16, 64, causal, o),
                                [](flashlab_fa3_options& turns) { turns.ping_pong = 1; });
        }
}

TEST_CASE("fa3: the runtime switches (stages, ping-pong) at d = 64 and fp16") {
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128}) {
      std::vector<flashlab_fa3_options> each;
      for (int stages = 1; stages <= fa3::max_stages(d, dtype); ++stages)
        for (int ping_pong : {0, 1}) {
          each.push_back(fa3_defaults());
          each.back().stages = stages;
          each.back().ping_pong = ping_pong;
        }
      expect_each_matches_reference(
          grid_case({1, 2, 1, 517, 1023}, dtype, d, FLASHLAB_CAUSAL_BOTTOM_RIGHT, {}), each);
    }
}

flashlab_status call_fa3(const ValidCall& call, const flashlab_fa3_options& o,
                         std::string* message);

flashlab_fa3_options software_exp2() {
  flashlab_fa3_options o = fa3_defaults();
  o.software_exp2 = 1;
  return o;
}

// The shapes of the grid test above: one tile, a ragged one, more items than SMs with
// N_q != N_k both ways (bottom-right rows that see no key), GQA and MQA. N_k >= 128 in most,
// so that they have unmasked tiles, the only ones the switch changes.
// The software exponential against the reference on the grid tests' shapes (GQA among
// them) and one whose N_k is a whole number of KV tiles, every mask, two scales. One test
// case per dtype and d: each is a process of its own on the device, and the four together
// take too long for one.
void expect_software_exp2_matches_reference(flashlab_dtype dtype, int d) {
  std::vector<GridShape> shapes(std::begin(kGridShapes), std::end(kGridShapes));
  shapes.push_back({1, 4, 2, 1023, 1024});
  for (const GridShape& s : shapes)
    for (flashlab_causal causal :
         {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT, FLASHLAB_CAUSAL_BOTTOM_RIGHT})
      // scale 1 spreads the scores (std ~ sqrt(d)): many x far below 0, some past the clamp
      // at -127.
      for (double scale : {0.0, 1.0}) {
        Case c = grid_case(s, dtype, d, causal, software_exp2());
        c.scale = scale;
        expect_matches_reference(c);
      }
}

TEST_CASE("fa3: software_exp2 matches the reference, d = 64, bf16 (GQA, every mask)") {
  expect_software_exp2_matches_reference(FLASHLAB_BF16, 64);
}
TEST_CASE("fa3: software_exp2 matches the reference, d = 64, fp16 (GQA, every mask)") {
  expect_software_exp2_matches_reference(FLASHLAB_FP16, 64);
}
TEST_CASE("fa3: software_exp2 matches the reference, d = 128, bf16 (GQA, every mask)") {
  expect_software_exp2_matches_reference(FLASHLAB_BF16, 128);
}
TEST_CASE("fa3: software_exp2 matches the reference, d = 128, fp16 (GQA, every mask)") {
  expect_software_exp2_matches_reference(FLASHLAB_FP16, 128);
}

// compute-sanitizer runs every "sanitizer*" case: the software exponential's kernels at both
// d, on a shape with unmasked tiles (N_k = 300: two whole KV tiles) and a ragged one.
TEST_CASE("sanitizer: fa3 with software_exp2, d = 64 and 128") {
  for (int d : {64, 128})
    expect_matches_reference(
        grid_case({1, 2, 1, 97, 300}, FLASHLAB_BF16, d, FLASHLAB_CAUSAL_NONE, software_exp2()));
}

TEST_CASE("fa3: software_exp2 on the persistent grid and per tile, more items than SMs") {
  std::vector<flashlab_fa3_options> grids;
  for (int grid :
       {FLASHLAB_FA3_GRID_PER_TILE, FLASHLAB_FA3_GRID_PERSISTENT, FLASHLAB_FA3_GRID_QUEUE}) {
    grids.push_back(software_exp2());
    grids.back().grid = grid;
  }
  for (int d : {64, 128})
    for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_BOTTOM_RIGHT})
      expect_each_matches_reference(many_items(causal, d, {}), grids);
}

TEST_CASE("fa3: software_exp2 is bitwise deterministic, and changes the output's bits") {
  constexpr int kRuns = 5;
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128}) {
      Case c =
          grid_case({2, 4, 2, 1023, 1023}, dtype, d, FLASHLAB_CAUSAL_TOP_LEFT, software_exp2());
      const uint64_t seed = fresh_seed();
      const auto runs = run_repeated(c, seed, kRuns);
      INFO(c.describe(), " seed=", seed);
      for (int r = 1; r < kRuns; ++r) CHECK(same_bits(runs[0], runs[r]));
      // The same inputs with every exponential on the special-function unit: a quarter of
      // W's elements differ by up to 1e-4 relative, so some of O's or L's bits must differ
      // (else the switch did not reach the kernel).
      c.fa3->software_exp2 = 0;
      const auto mufu_only = run_repeated(c, seed, 1);
      CHECK(!same_bits(runs[0], mufu_only[0]));
    }
}

// A 0/1 switch set to -1 or 2, the rest of `o` valid: refused, naming the switch and value.
void check_flag_refused(const ValidCall& call, flashlab_fa3_options o,
                        int32_t flashlab_fa3_options::*flag, const std::string& name) {
  std::string message;
  for (int bad : {-1, 2}) {
    o.*flag = bad;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(message.find(name + " = " + std::to_string(bad)) != std::string::npos);
    CHECK(message.find("must be 0 (off) or 1 (on)") != std::string::npos);
  }
}

TEST_CASE("fa3: software_exp2's option is checked") {
  flashlab_fa3_options defaults{};
  REQUIRE(flashlab_fa3_default_options(&defaults) == FLASHLAB_OK);
  CHECK(defaults.software_exp2 == 0);
  std::string message;
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128}) {
      const ValidCall call(FLASHLAB_KERNEL_FA3, dtype, d);
      CHECK(call_fa3(call, software_exp2(), &message) == FLASHLAB_OK);
      CHECK(message.empty());
    }
  const ValidCall call(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 128);
  check_flag_refused(call, software_exp2(), &flashlab_fa3_options::software_exp2, "software_exp2");
  // Not compiled: with another arrangement (even at bf16, d = 128, where the others all
  // are), or with the conditional rule.
  for (int field = 0; field < 3; ++field) {
    flashlab_fa3_options o = software_exp2();
    if (field == 0) o.warp_specialized = 0;
    if (field == 1) o.intra_overlap = 0;
    if (field == 2) o.conditional_rescale = 1;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_UNSUPPORTED);
    CHECK(message.find("software_exp2 = 1 is compiled with warp_specialized = 1, intra_overlap "
                       "= 1 and conditional_rescale = 0 only") != std::string::npos);
  }
}

TEST_CASE("fa3: overlap_items's option is checked") {
  CHECK(fa3_defaults().overlap_items == fa3::kDefaultOverlapItems);
  const ValidCall call(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 128);
  std::string message;
  for (int value : {0, 1}) {
    flashlab_fa3_options o = fa3_defaults();
    o.overlap_items = value;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_OK);
    CHECK(message.empty());
  }
  check_flag_refused(call, fa3_defaults(), &flashlab_fa3_options::overlap_items, "overlap_items");
}

TEST_CASE("fa3: kv_l2_share's option is checked") {
  CHECK(fa3_defaults().kv_l2_share == FLASHLAB_FA3_AUTO);
  const ValidCall call(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 128);
  std::string message;
  for (int share : {1, 50, fa3::kMaxKvL2Share}) {
    flashlab_fa3_options o = fa3_defaults();
    o.kv_l2_share = share;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_OK);
    CHECK(message.empty());
  }
  for (int bad : {0, -2, fa3::kMaxKvL2Share + 1}) {
    flashlab_fa3_options o = fa3_defaults();
    o.kv_l2_share = bad;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(message == "fa3 option kv_l2_share = " + std::to_string(bad) +
                         ": it must be a share of the L2 in percent, 1 to 100, or "
                         "FLASHLAB_FA3_AUTO (-1: the kernel's own, fa3::auto_kv_l2_share)");
  }
}

flashlab_fa3_options conditional() {
  flashlab_fa3_options o = fa3_defaults();
  o.conditional_rescale = 1;
  return o;
}

TEST_CASE("fa3: conditional rescaling matches the reference (every d and dtype)") {
  // scale 1 spreads the scores (std ~ sqrt(d)), so that bases move by more than tau often;
  // 0 is the default 1/sqrt(d), under which they rarely do.
  constexpr int kShapes[][2] = {{1, 1}, {97, 113}, {300, 1023}, {1023, 300}};
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128})
      for (double scale : {0.0, 1.0})
        for (const auto& shape : kShapes)
          for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_BOTTOM_RIGHT}) {
            Case c = grid_case({1, 2, 1, shape[0], shape[1]}, dtype, d, causal, conditional());
            c.scale = scale;
            expect_matches_reference(c);
          }
}

// Counts in flashlab_rescale_count order, as the reference's struct.
cpu::RescaleCounts counts_of(const int64_t* n) {
  cpu::RescaleCounts c;
  c.first = n[FLASHLAB_RESCALE_FIRST], c.rescaled = n[FLASHLAB_RESCALE_RESCALED];
  c.skipped = n[FLASHLAB_RESCALE_SKIPPED], c.kept = n[FLASHLAB_RESCALE_KEPT];
  return c;
}

TEST_CASE("fa3: the rescales counted on the device are the CPU reference's") {
  struct Shape {
    int n_q, n_k;
    flashlab_causal causal;
    double scale;
  };
  // N_k spans several tiles of Bc keys, so that rows have later updates to count.
  const Shape shapes[] = {{97, 1023, FLASHLAB_CAUSAL_NONE, 1.0},
                          {1023, 1023, FLASHLAB_CAUSAL_TOP_LEFT, 1.0},
                          {300, 2049, FLASHLAB_CAUSAL_BOTTOM_RIGHT, 1.0},
                          {513, 4096, FLASHLAB_CAUSAL_NONE, 0.0}};
  for (int d : {64, 128})
    for (const Shape& s : shapes) {
      Case c = grid_case({2, 4, 2, s.n_q, s.n_k}, FLASHLAB_BF16, d, s.causal, conditional());
      c.scale = s.scale;
      const uint64_t seed = fresh_seed();
      const RescaleCounts r = run_rescale_counts(c, seed);
      INFO(c.describe(), " seed=", seed);
      const int64_t* g = r.gpu;
      const int64_t* e = r.cpu;
      INFO("device first/rescaled/skipped/kept = ", g[0], "/", g[1], "/", g[2], "/", g[3], ", CPU ",
           e[0], "/", e[1], "/", e[2], "/", e[3]);
      CHECK(r.outcome.unwritten == 0);
      CHECK(r.outcome.err <= r.outcome.bound);
      // Which rows start and how many later updates there are follows from the shape alone.
      // The rule for agreement (first and the later updates equal, each count within
      // rounding near the threshold) is stated once, beside the reference's counts.
      const cpu::RescaleAgreement agreement =
          cpu::compare_rescale_counts(counts_of(g), counts_of(e));
      INFO(agreement.reason);
      CHECK(agreement.agree);
      // The cases exercise what they claim: at scale 1 bases move and growths are skipped.
      if (s.scale == 1.0) {
        CHECK(e[FLASHLAB_RESCALE_RESCALED] > 0);
        CHECK(e[FLASHLAB_RESCALE_SKIPPED] > 0);
      }
    }
}

TEST_CASE(
    "sanitizer: fa3 under the conditional rule, counting or not (compute-sanitizer runs it)") {
  for (int d : {64, 128}) {
    Case c = grid_case({1, 2, 1, 97, 203}, FLASHLAB_BF16, d, FLASHLAB_CAUSAL_BOTTOM_RIGHT,
                       conditional());
    c.scale = 1.0;
    expect_matches_reference(c);
    const RescaleCounts r = run_rescale_counts(c, fresh_seed());
    CHECK(r.outcome.err <= r.outcome.bound);
    CHECK(r.gpu[FLASHLAB_RESCALE_FIRST] == r.cpu[FLASHLAB_RESCALE_FIRST]);
  }
}

TEST_CASE("fa3: conditional rescaling's options are checked") {
  const ValidCall call(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 128);
  std::string message;
  flashlab_fa3_options o = conditional();
  o.conditional_rescale = 2;
  CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
  CHECK(message.find("conditional_rescale = 2") != std::string::npos);
  CHECK(message.find("must be 0 (off) or 1 (on)") != std::string::npos);
  void* counts = nullptr;
  REQUIRE(cudaMalloc(&counts, 2 * FLASHLAB_RESCALE_COUNTS * sizeof(int64_t)) == cudaSuccess);
  o = conditional();
  o.conditional_rescale = 0;
  o.rescale_counts = static_cast<int64_t*>(counts);
  CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
  CHECK(message.find("set conditional_rescale = 1") != std::string::npos);
  o = conditional();
  o.rescale_counts = reinterpret_cast<int64_t*>(static_cast<char*>(counts) + 4);
  CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_MISALIGNED);
  CHECK(message.find("not aligned to 8 bytes") != std::string::npos);
  int64_t host_counts[FLASHLAB_RESCALE_COUNTS];
  o.rescale_counts = host_counts;
  CHECK(call_fa3(call, o, &message) != FLASHLAB_OK);
  CHECK(message.find("rescale_counts") != std::string::npos);
  o = conditional();
  o.intra_overlap = 0;
  CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_UNSUPPORTED);
  CHECK(message.find("conditional_rescale = 1 is compiled with") != std::string::npos);
  CHECK(cudaFree(counts) == cudaSuccess);
}

// Calls flashlab_forward_fa3 on a valid problem with `o`; returns the status and message.
flashlab_status call_fa3(const ValidCall& call, const flashlab_fa3_options& o,
                         std::string* message) {
  const flashlab_status status = flashlab_forward_fa3(&call.params, &o);
  *message = flashlab_last_error();
  return status;
}

TEST_CASE("fa3: switches out of range, another kernel, NULL options") {
  flashlab_fa3_options defaults{};
  REQUIRE(flashlab_fa3_default_options(&defaults) == FLASHLAB_OK);
  CHECK(defaults.warp_specialized == 1);
  CHECK(defaults.stages == FLASHLAB_FA3_AUTO);  // per d: fa3::default_stages
  CHECK(defaults.ping_pong == FLASHLAB_FA3_AUTO);
  const ValidCall call(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 128);
  std::string message;
  CHECK(call_fa3(call, defaults, &message) == FLASHLAB_OK);
  CHECK(message.empty());
  for (int stages : {0, -2, fa3::kMaxStages + 1}) {
    flashlab_fa3_options o = defaults;
    o.stages = stages;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(message.find("stages = " + std::to_string(stages)) != std::string::npos);
    CHECK(message.find("or FLASHLAB_FA3_AUTO") != std::string::npos);
  }
  {  // In range, but more than d = 128's SRAM holds: a fourth stage would need 288 KiB.
    flashlab_fa3_options o = defaults;
    o.stages = fa3::max_stages(128, FLASHLAB_BF16) + 1;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(message.find("fa3 option stages = 4: at d = 128 a block's SRAM holds 1 to 3 stages of "
                       "K and V") != std::string::npos);
  }
  CHECK(defaults.grid == fa3::kDefaultGrid);
  for (int grid : {-1, FLASHLAB_FA3_GRID_QUEUE + 1}) {
    flashlab_fa3_options o = defaults;
    o.grid = grid;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(message.find("grid = " + std::to_string(grid) + " is unknown") != std::string::npos);
  }
  {  // The work queue is handed out by the producer warp: refused without one.
    flashlab_fa3_options o = defaults;
    o.grid = FLASHLAB_FA3_GRID_QUEUE;
    o.warp_specialized = 0;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_UNSUPPORTED);
    CHECK(message.find("needs warp_specialized = 1") != std::string::npos);
  }
  flashlab_fa3_options o = defaults;
  for (int ping_pong : {2, -2}) {
    o.ping_pong = ping_pong;
    CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
    CHECK(message.find("ping_pong = " + std::to_string(ping_pong) +
                       ": it must be 0 (off), 1 (on) or FLASHLAB_FA3_AUTO") != std::string::npos);
  }
  o = defaults;
  o.intra_overlap = 2;
  CHECK(call_fa3(call, o, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
  CHECK(message.find("must be 0 (off) or 1 (on)") != std::string::npos);
  o = defaults;
  const ValidCall fa2(FLASHLAB_KERNEL_FA2, FLASHLAB_BF16, 128);
  CHECK(call_fa3(fa2, defaults, &message) == FLASHLAB_ERROR_BAD_ARGUMENT);
  CHECK(message.find("FLASHLAB_KERNEL_FA3") != std::string::npos);
  CHECK(flashlab_forward_fa3(&call.params, nullptr) == FLASHLAB_ERROR_NULL_POINTER);
  CHECK(std::string(flashlab_last_error()).find("options is NULL") != std::string::npos);
  // Not compiled: the switches other than stages and ping-pong exist at bf16, d = 128 only.
  const ValidCall d64(FLASHLAB_KERNEL_FA3, FLASHLAB_BF16, 64);
  o = defaults;
  o.intra_overlap = 0;
  CHECK(call_fa3(d64, o, &message) == FLASHLAB_ERROR_UNSUPPORTED);
  CHECK(message.find("both must be 1") != std::string::npos);
}

TEST_CASE("fa3: a broadcast row (row stride 0) is refused, and broadcast heads and batches are read") {
  const ValidCall ok(FLASHLAB_KERNEL_FA3);
  std::string message;
  {
    ValidCall call(FLASHLAB_KERNEL_FA3);
    call.params.k_stride[2] = 0;  // every key row the same memory: TMA has no 0 stride
    CHECK(call.call(&message) == FLASHLAB_ERROR_UNSUPPORTED);
    CHECK(message.find("K's row stride is 0") != std::string::npos);
    CHECK(message.find("the fa2, naive and scalar kernels take it") != std::string::npos);
  }
  {
    ValidCall call(FLASHLAB_KERNEL_FA3);
    call.params.q_stride[1] = 0;  // both query heads read the same Q
    call.params.k_stride[0] = call.params.v_stride[0] = 0;
    CHECK(call.call(&message) == FLASHLAB_OK);
    CHECK(message.empty());
  }
}

}  // namespace
}  // namespace flashlab::gpu::test

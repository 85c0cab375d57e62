// The mirror of the GPU decode (decode_kernel_program.cpp): every tensor's bytes, the work
// and the grid against the closed form of its header, with each split's keys and pages
// found here key by key (not by the program's formula), the block table's entries as the
// sectors they lie in; ragged lengths including 0, every
// split count from 1 to 64, pages of 16, 64 and 256 tokens and a contiguous cache, GQA.
#include "helpers.hpp"

#include "flashlab/sim/decode_kernel.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <set>

namespace flashlab::sim::test {

namespace {

struct PerSequence {
  Index working = 0, table_sectors = 0, steps = 0;
};

// The block table as compare lays it out: a row per sequence of the longest one's pages,
// from a sector-aligned base.
Index table_row_entries(const DecodeShape& s, Index page_size) {
  Index longest = 0;
  for (const Index L : s.lengths) longest = std::max(longest, L);
  return page_size > 0 ? ceil_div(longest, page_size) : 0;
}
constexpr Index kEntryBytes = sizeof(std::int32_t);  // a page's index in the table
// The sectors a split's entries (one per page it touches) lie in, each once (its block reads
// them through its SM's L1), in sequence `seq`'s row.
Index sectors_of(const std::set<Index>& pages, Index seq, Index row_entries) {
  std::set<Index> sectors;
  for (const Index page : pages)
    sectors.insert((seq * row_entries + page) * kEntryBytes / kSectorBytes);
  return Index(sectors.size());
}

// Step t (keys t Bc ..) belongs to split t / q, q = ceil(steps / S); the pages a split
// touches are those of its keys, collected one key at a time.
PerSequence brute_force(Index L, const DecodeKernelFacts& f, Index seq, Index row_entries) {
  const Index Bc = f.keys_per_step, steps = ceil_div(L, Bc);
  PerSequence out;
  if (steps == 0) return out;
  const Index q = ceil_div(steps, f.splits);
  std::vector<std::set<Index>> pages(f.splits);
  std::vector<Index> split_steps(f.splits, 0);
  for (Index key = 0; key < L; ++key) {
    const Index split = key / Bc / q;
    REQUIRE(split < f.splits);
    if (f.page_size > 0) pages[split].insert(key / f.page_size);
    if (key % Bc == 0) ++split_steps[split];
  }
  for (Index s = 0; s < f.splits; ++s) {
    out.working += split_steps[s] > 0;
    out.table_sectors += sectors_of(pages[s], seq, row_entries);
    out.steps += split_steps[s];
  }
  return out;
}

void check_closed_form(const DecodeShape& s, const DecodeKernelFacts& f) {
  CAPTURE(f.splits);
  CAPTURE(f.page_size);
  CAPTURE(f.keys_per_step);
  CAPTURE(s.n_q);
  const PassReport r = count_decode_kernel(s, f);
  const Index H = s.heads_kv, rows = s.n_q * s.group, d = s.d, b = bytes_of(f.dtype);
  const Index B = s.batch(), S = f.splits;
  Index keys = 0, working = 0, table_sectors = 0, steps = 0;
  for (Index seq = 0; seq < B; ++seq) {
    const Index L = s.lengths[std::size_t(seq)];
    const PerSequence p = brute_force(L, f, seq, table_row_entries(s, f.page_size));
    keys += L;
    working += p.working;
    table_sectors += p.table_sectors;
    steps += p.steps;
  }
  CHECK(r.tensor("Q").read == H * working * rows * d * b);
  CHECK(r.tensor("K").read == H * keys * d * b);
  CHECK(r.tensor("V").read == H * keys * d * b);
  CHECK(r.tensor("block table").read == H * table_sectors * kSectorBytes);
  CHECK(r.tensor("partial state").written == B * H * S * rows * (d + 2) * 4);
  CHECK(r.tensor("partial state").read == r.tensor("partial state").written);
  CHECK(r.tensor("O").written == B * H * rows * d * b);
  CHECK(r.tensor("LSE").written == B * H * rows * 4);
  CHECK(r.launch("split").blocks == B * H * S);
  CHECK(r.launch("split").working == H * working);
  CHECK(r.launch("combine").blocks == B * s.heads_q());
  // S = Q K^T and U += W V; exps: one per score, one alpha per row and step, and per row of
  // the combine two per merge and one log.
  CHECK(r.ops.matrix_flops == 4 * H * rows * keys * d);
  CHECK(r.ops.exp == H * rows * (keys + steps) + B * H * rows * (2 * (S - 1) + 1));
}

}  // namespace

TEST_CASE("decode mirror: bytes, work and grid match the closed form, splits 1 to 64") {
  const DecodeShape s{
      .lengths = {0, 1, 97, 1023, 4096, 339}, .heads_kv = 2, .group = 4, .n_q = 1, .d = 128};
  for (Index splits = 1; splits <= 64; ++splits)
    for (const Index page : {0, 16, 64, 256})
      check_closed_form(s, {.splits = splits, .keys_per_step = 64, .page_size = page});
}

TEST_CASE("decode mirror: several query rows, odd steps and fp16") {
  for (const Index n_q : {1, 4, 16})
    for (const Index step : {1, 48, 128}) {
      const DecodeShape s{.lengths = {17, 0, 2049}, .heads_kv = 1, .group = 8, .n_q = n_q, .d = 64};
      check_closed_form(
          s, {.splits = 7, .keys_per_step = step, .page_size = 16, .dtype = DType::fp16});
    }
}

TEST_CASE(
    "decode mirror: K and V are read once whatever the splits, and the states grow with them") {
  const DecodeShape s{.lengths = {32768}, .heads_kv = 8, .group = 4, .n_q = 1, .d = 128};
  const PassReport one = count_decode_kernel(s, {.splits = 1});
  const PassReport many = count_decode_kernel(s, {.splits = 16});
  CHECK(one.tensor("K").read == many.tensor("K").read);
  CHECK(many.tensor("partial state").written == 16 * one.tensor("partial state").written);
  const HardwareProfile& h200 = find_profile("h200");
  CHECK(one.launch("split").busy_sms(h200.sm_count) == 8);
  CHECK(many.launch("split").busy_sms(h200.sm_count) == 8 * 16);  // 128 blocks, one an SM
  CHECK(many.launch("split").waves(h200.sm_count) == 1);
}

// The queue grid: pieces by a rule of the facts, persistent blocks, a claim per item and per
// block. Pieces found here key by key from the rule's boundaries; two rules, one shrinking as
// the kernel's (sizes 2 (P - j) - 1), one with empty pieces in the middle.
Index shrinking(Index steps, Index pieces, Index j) {
  return steps - steps * (pieces - j) * (pieces - j) / (pieces * pieces);
}
Index with_holes(Index steps, Index pieces, Index j) {  // odd pieces empty
  return std::min(steps, (j + 1) / 2 * ceil_div(steps, (pieces + 1) / 2));
}

TEST_CASE("decode mirror: the queue grid's pieces, claims and blocks match the closed form") {
  const DecodeShape s{
      .lengths = {0, 1, 97, 1023, 4096, 339}, .heads_kv = 2, .group = 4, .n_q = 1, .d = 128};
  for (auto* rule : {&shrinking, &with_holes})
    for (const Index pieces : {1, 2, 7, 22, 64})
      for (const Index persistent : {5, 264}) {
        CAPTURE(pieces);
        CAPTURE(persistent);
        const DecodeKernelFacts f{.splits = pieces,
                                  .keys_per_step = 64,
                                  .page_size = 16,
                                  .rows_per_block = 16,
                                  .stages = 3,
                                  .warps = 4,
                                  .persistent_blocks = persistent,
                                  .piece_first_step = rule,
                                  .merge_rows_per_pass = 8,
                                  .claim_bytes = 16};
        const PassReport r = count_decode_kernel(s, f);
        Index working = 0, table_sectors = 0;
        for (Index seq = 0; seq < 6; ++seq) {
          const Index L = s.lengths[std::size_t(seq)];
          const Index steps = ceil_div(L, Index{64});
          std::vector<std::set<Index>> pages{std::size_t(pieces)};
          for (Index key = 0; key < L; ++key) {
            Index j = 0;  // the piece whose steps hold this key's step
            while (!(rule(steps, pieces, j) <= key / 64 && key / 64 < rule(steps, pieces, j + 1)))
              ++j;
            REQUIRE(j < pieces);
            pages[std::size_t(j)].insert(key / 16);
          }
          for (const auto& piece_pages : pages) {
            working += !piece_pages.empty();
            table_sectors += sectors_of(piece_pages, seq, table_row_entries(s, f.page_size));
          }
        }
        const Index H = 2, rows = 4, items = 6 * H * 1 * pieces;
        const Index blocks = std::min(items, persistent);
        CHECK(r.tensor("Q").read == H * working * rows * 128 * 2);
        CHECK(r.tensor("block table").read == H * table_sectors * kSectorBytes);
        CHECK(r.tensor("partial state").written == 6 * H * pieces * rows * 130 * 4);
        CHECK(r.launch("queue").blocks == blocks);
        CHECK(r.launch("queue").working == blocks);
        // A sector out and a sector back a claim, none of them a store instruction.
        CHECK(r.tensor("queue counter").read == (items + blocks) * 32);
        CHECK(r.tensor("queue counter").written == (items + blocks) * 32);
        CHECK(r.tensor("queue counter").written_by_atomics == (items + blocks) * 32);
        CHECK(r.bytes_stores_issued() == r.bytes_written() - (items + blocks) * 32);
        // The ring of 3 stages of K and V (64 keys x 128 x 2 bytes each), the merge of 8 rows of
        // 4 warps beside it, and the claim.
        CHECK(r.peak_sram == 3 * 2 * 64 * 128 * 2 + 4 * 8 * 130 * 4 + 16);
      }
}

TEST_CASE("decode mirror: a piece rule that does not cut the sequence in order is refused") {
  const DecodeShape s{.lengths = {4096}};
  auto* backwards = +[](Index steps, Index pieces, Index j) { return steps - steps * j / pieces; };
  CHECK(contains(message_of([&] {
                   count_decode_kernel(
                       s, {.splits = 4, .persistent_blocks = 8, .piece_first_step = backwards});
                 }),
                 "does not cut"));
}

TEST_CASE("decode mirror: waves of the blocks an SM holds at once, the SMs spread over first") {
  const DecodeShape s{.lengths = {131072}, .heads_kv = 8, .group = 4, .n_q = 1, .d = 128};
  const HardwareProfile& h200 = find_profile("h200");
  // 8 KV heads x 33 splits = 264 blocks: one wave at 2 an SM, two at 1; 34 splits = 272
  // blocks: two waves at 2 an SM, three at 1.
  for (const int per_sm : {1, 2}) {
    CAPTURE(per_sm);
    const Launch a =
        count_decode_kernel(s, {.splits = 33, .blocks_per_sm = per_sm}).launch("split");
    const Launch b =
        count_decode_kernel(s, {.splits = 34, .blocks_per_sm = per_sm}).launch("split");
    CHECK(a.waves(h200.sm_count) == (per_sm == 2 ? 1 : 2));
    CHECK(b.waves(h200.sm_count) == (per_sm == 2 ? 2 : 3));
    CHECK(a.busy_sms(h200.sm_count) == 132);  // 264 working blocks cover every SM
  }
  // 100 blocks keep 100 SMs busy, not 50 pairs.
  const Launch few = count_decode_kernel({.lengths = {131072}, .heads_kv = 4, .group = 4},
                                         {.splits = 25, .blocks_per_sm = 2})
                         .launch("split");
  CHECK(few.blocks == 100);
  CHECK(few.busy_sms(h200.sm_count) == 100);
}

TEST_CASE("decode mirror: every sequence empty reads no cache and still writes O and LSE") {
  const DecodeShape s{.lengths = {0, 0, 0}, .heads_kv = 2, .group = 2, .n_q = 2, .d = 64};
  const PassReport r = count_decode_kernel(s, {.splits = 4, .page_size = 64});
  CHECK(r.tensor("K").read == 0);
  CHECK(r.tensor("Q").read == 0);
  CHECK(r.tensor("block table").read == 0);
  CHECK(r.launch("split").working == 0);
  CHECK(r.launch("split").busy_sms(132) == 0);
  CHECK(r.tensor("O").written == 3 * 2 * 2 * 2 * 64 * 2);
  // From DRAM too: the lengths' one sector, and no Q that no block reads.
  CHECK(compulsory_dram(r.launch("split"), Bytes{1} << 30).read == 32);
}

namespace {

// The kernel's stores as its sources write them (kernel_info.hpp's decode::), by hand: U by
// 32 lanes along the state, m and l by one lane in one 8-byte store, O along the row, LSE of
// 8 consecutive rows by 8 lanes; each state padded to whole sectors (d + 8 floats for d a
// multiple of 8).
const DecodeStores kAsBuilt{.state_u = WarpStore{4, 32, 1},
                            .state_ml = WarpStore{8, 1, 1},
                            .o = WarpStore{2, 32, 1},
                            .lse = WarpStore{4, 8, 1},
                            .state_header = 256};
Index padded(Index d) { return d + 8; }
// The layout before the padding: states packed at d + 2 floats, m and l one store each,
// LSE one float a row.
const DecodeStores kPacked{.state_u = WarpStore{4, 32, 1},
                           .state_ml = WarpStore{4, 1, 1},
                           .o = WarpStore{2, 32, 1},
                           .lse = WarpStore{4, 1, 1},
                           .state_header = 256};

// The sectors of `count` packed states laid one after another, instruction by instruction:
// each 128-byte run of U as the bytes it covers, then m and l as a sector each.
Bytes states_lane_by_lane(Index count, Index d, Bytes header) {
  const Bytes stride = (d + 2) * 4;
  Bytes out = 0;
  for (Index k = 0; k < count; ++k) {
    const Bytes u = header + k * stride;
    for (Bytes at = 0; at < d * 4; at += 128) {
      const Bytes first = u + at, last = std::min(u + d * 4, first + 128) - 1;
      out += (last / 32 - first / 32 + 1) * 32;
    }
    out += 2 * 32;
  }
  return out;
}

}  // namespace

TEST_CASE("decode mirror: writes out of the SMs are the sectors of the kernels' stores") {
  for (const Index d : {64, 128})
    for (const Index splits : {1, 3, 6, 7})
      for (const Index group : {1, 4}) {
        const DecodeShape s{
            .lengths = {0, 97, 4096}, .heads_kv = 2, .group = group, .n_q = 1, .d = d};
        CAPTURE(d);
        CAPTURE(splits);
        CAPTURE(group);
        const Index states = 3 * 2 * group * splits, rows = 3 * 2 * group;
        // As built: every state d / 8 + 1 sectors (U's whole, then m and l's), written and
        // read.
        const PassReport r = count_decode_kernel(
            s,
            {.splits = splits, .keys_per_step = 64, .state_floats = padded(d), .stores = kAsBuilt});
        CHECK(r.tensor("partial state").written == states * (d / 8 + 1) * 32);
        CHECK(r.tensor("partial state").read == states * padded(d) * 4);
        CHECK(r.tensor("partial state").elements == states * (d + 2));
        CHECK(r.tensor("O").written == rows * d * 2);
        CHECK(r.tensor("LSE").written == (rows + 7) / 8 * 32);  // 8 rows a sector
        // Packed: U's runs cross sectors, m and l a sector each; loads booked as their data.
        const PassReport p =
            count_decode_kernel(s, {.splits = splits, .keys_per_step = 64, .stores = kPacked});
        CHECK(p.tensor("partial state").written == states_lane_by_lane(states, d, 256));
        CHECK(p.tensor("partial state").read == states * (d + 2) * 4);
        CHECK(p.tensor("LSE").written == rows * 32);  // one float a store: a sector a row
      }
}

TEST_CASE("decode mirror: the device's shape, packed and padded states") {
  // B = 8, 32 query heads over 8 KV heads, L = 32768, d = 128, 6 splits (the compare run of
  // 2026-12-01 measured 999.0 KiB written against 845.0 KiB of data, packed).
  const DecodeShape s{
      .lengths = std::vector<Index>(8, 32768), .heads_kv = 8, .group = 4, .n_q = 1, .d = 128};
  const Index states = 8 * 32 * 6;                                   // 1536
  const Bytes o_and_lse = 8 * 32 * 128 * 2 + 8 * 32 * 32;            // LSE a sector a row
  const Bytes o_and_lse_built = 8 * 32 * 128 * 2 + 8 * 32 / 8 * 32;  // 8 rows a sector
  // Packed: 384 states of each offset 0, 8, 16, 24 bytes past a sector.
  const PassReport packed = count_decode_kernel(s, {.splits = 6, .stores = kPacked});
  CHECK(packed.tensor("partial state").written ==
        states / 4 * (16 * 32 + 3 * 20 * 32 + 4 * 2 * 32));
  CHECK(packed.bytes_written() == states / 4 * 2688 + o_and_lse);
  // Padded: 17 sectors a state, 544 bytes for 520 of data.
  const PassReport built =
      count_decode_kernel(s, {.splits = 6, .state_floats = 136, .stores = kAsBuilt});
  CHECK(built.tensor("partial state").written == states * 544);
  CHECK(built.bytes_written() == states * 544 + o_and_lse_built);
}

TEST_CASE("decode mirror: the combine's grid, a warp a row and 8 rows a block") {
  // 3 sequences x 2 KV heads x a group of 4 x 5 query rows: 120 rows, 15 blocks of 8; LSE
  // 120 floats, 15 sectors. Not described: a block per (sequence, query head), 3 x 8 = 24.
  const DecodeShape s{.lengths = {100, 0, 7}, .heads_kv = 2, .group = 4, .n_q = 5, .d = 64};
  DecodeKernelFacts f{.splits = 3, .stores = kAsBuilt};
  f.combine_rows_per_block = 8;
  f.combine_threads = 256;
  const PassReport r = count_decode_kernel(s, f);
  CHECK(r.launch("combine").blocks == 15);
  CHECK(r.launch("combine").threads == 256);
  CHECK(r.tensor("LSE").written == 15 * 32);
  f.combine_rows_per_block = 0;
  CHECK(count_decode_kernel(s, f).launch("combine").blocks == 24);
  f.combine_rows_per_block = 33;
  CHECK_THROWS_WITH_AS(count_decode_kernel(s, f), doctest::Contains("combine_rows_per_block"),
                       cpu::InvalidArgument);
}

TEST_CASE("decode mirror: states laid off the sectors cost the sectors they touch") {
  // d = 64 with 70 floats a state (280 bytes, 256 of U): the states start 0, 24, 16, 8 bytes
  // past a sector in turn. Written: U in two runs of 128 bytes, 4 + 4 sectors from a sector,
  // 5 + 5 from 24, 16 or 8 (the run boundary's sector twice), m and l one sector each (bytes
  // 256 to 263 of the state, within one sector at every offset). Read: the 264 bytes of data
  // at once, 9 sectors at every offset (they end by byte 24 + 264 = 288 of the first sector).
  const DecodeShape s{.lengths = {4096}, .heads_kv = 1, .group = 4, .n_q = 1, .d = 64};
  const PassReport r =
      count_decode_kernel(s, {.splits = 1, .state_floats = 70, .stores = kAsBuilt});
  CHECK(r.tensor("partial state").written == (8 + 10 + 10 + 10 + 4) * 32);
  CHECK(r.tensor("partial state").read == 4 * 9 * 32);
}

TEST_CASE("decode mirror: a lone split ends its rows: no states, no combine, LSE a run a block") {
  // The kernel as built with one split: the split kernel writes O and LSE, each block the
  // LSE of its packed rows (consecutive rows of the array) in one run of up to 16 floats.
  DecodeStores stores = kAsBuilt;
  stores.lone_split_lse = WarpStore{4, 16, 1};
  const DecodeKernelFacts lone{.splits = 1,
                               .keys_per_step = 64,
                               .rows_per_block = 16,
                               .state_floats = padded(128),
                               .split_ends_rows = true,
                               .stores = stores};
  DecodeKernelFacts through_combine = lone;
  through_combine.split_ends_rows = false;
  {
    // 3 sequences x 2 KV heads, a group of 4 and one query: 6 runs of 16 bytes at 16-byte
    // steps, a sector each.
    const DecodeShape s{.lengths = {0, 97, 4096}, .heads_kv = 2, .group = 4, .n_q = 1, .d = 128};
    const PassReport r = count_decode_kernel(s, lone);
    const PassReport c = count_decode_kernel(s, through_combine);
    CHECK(r.tensor("partial state").written == 0);
    CHECK(r.tensor("partial state").read == 0);
    CHECK(r.tensor("partial state").elements == 0);
    CHECK(c.tensor("partial state").written > 0);
    CHECK(r.tensor("LSE").written == 6 * 32);
    CHECK(r.tensor("O").written == c.tensor("O").written);
    CHECK(r.tensor("K").read == c.tensor("K").read);
    CHECK(r.tensor("Q").read == c.tensor("Q").read);
    CHECK(r.bytes_read() == c.bytes_read() - c.tensor("partial state").read);
    REQUIRE(r.launches.size() == 1);
    CHECK(r.launches[0].name == "split");
    CHECK(r.launch("split").blocks == c.launch("split").blocks);
    CHECK(c.launch("combine").blocks > 0);
    // The finalize runs in the split kernel: the same operations.
    CHECK(r.ops.exp == c.ops.exp);
    CHECK(r.ops.matrix_flops == c.ops.matrix_flops);
  }
  {
    // A group of 2 and 3 queries: 6 rows (24 bytes) a pair, runs at bytes 0, 24, 48, 72, 96
    // and 120: 1 + 2 + 2 + 1 + 1 + 2 sectors.
    const DecodeShape s{.lengths = {5, 64, 1}, .heads_kv = 2, .group = 2, .n_q = 3, .d = 64};
    CHECK(count_decode_kernel(s, lone).tensor("LSE").written == 9 * 32);
  }
  {
    // A group of 4 and 5 queries: 20 rows a pair, two row blocks (16 rows, then 4), pairs
    // 80 bytes apart: [0, 64) 2 sectors and [64, 80) 1; [80, 144) 3 and [144, 160) 1.
    const DecodeShape s{.lengths = {50}, .heads_kv = 2, .group = 4, .n_q = 5, .d = 64};
    const PassReport r = count_decode_kernel(s, lone);
    CHECK(r.tensor("LSE").written == 7 * 32);
    CHECK(r.launch("split").blocks == 2 * 2);
  }
  // Only one split on the split grid ends its rows.
  DecodeKernelFacts two = lone;
  two.splits = 2;
  const DecodeShape s{.lengths = {100}, .heads_kv = 1, .group = 4, .n_q = 1, .d = 64};
  CHECK_THROWS_WITH_AS(count_decode_kernel(s, two), doctest::Contains("only one split"),
                       cpu::InvalidArgument);
  DecodeKernelFacts queue = lone;
  queue.persistent_blocks = 264;
  CHECK_THROWS_WITH_AS(count_decode_kernel(s, queue), doctest::Contains("queue grid"),
                       cpu::InvalidArgument);
}

TEST_CASE("decode mirror: count-only is fast for long caches and large batches") {
  const DecodeShape s{.lengths = std::vector<Index>(64, Index{1} << 30),
                      .heads_kv = 8,
                      .group = 4,
                      .n_q = 16,
                      .d = 128};
  const auto t0 = std::chrono::steady_clock::now();
  const PassReport r = count_decode_kernel(s, {.splits = 1024, .page_size = 16});
  CHECK(r.tensor("K").read == 64 * 8 * (Index{1} << 30) * 128 * 2);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.5);
}

TEST_CASE("decode mirror: bad inputs are refused with what would be right") {
  const DecodeShape s{};
  CHECK(
      contains(message_of([&] { count_decode_kernel(s, {.state_floats = 129}); }),
               "state_floats = 129 is out of range: the decode mirror takes 130 <= state_floats"));
  CHECK(contains(message_of([&] { count_decode_kernel(s, {.stores = {.state_header = -1}}); }),
                 "state_header = -1 is out of range"));
  CHECK(contains(message_of([&] {
                   count_decode_kernel(s, {.stores = {.state_u = WarpStore{4, 0, 1}}});
                 }),
                 "1 to 32 active lanes"));
  CHECK(contains(message_of([&] { count_decode_kernel(s, {.splits = 0}); }),
                 "splits = 0 is out of range: the decode mirror takes 1 <= splits <= 1024"));
  CHECK(contains(message_of([&] { count_decode_kernel(s, {.splits = 1025}); }), "splits = 1025"));
  CHECK(contains(message_of([&] { count_decode_kernel({.lengths = {}}, {}); }), "batch = 0"));
  CHECK(contains(message_of([&] {
                   count_decode_kernel({.lengths = {5, -1}}, {});
                 }),
                 "a sequence's length = -1"));
  CHECK(
      contains(message_of([&] { count_decode_kernel(s, {.page_size = -16}); }), "page_size = -16"));
  CHECK(contains(message_of([&] { count_decode_kernel({.n_q = 0}, {}); }), "n_q = 0"));
  CHECK(contains(message_of([&] { count_decode_kernel(s, {.keys_per_step = 0}); }),
                 "keys_per_step = 0"));
  CHECK(contains(message_of([&] { count_decode_kernel(s, {.stages = -1}); }), "stages = -1"));
  CHECK(contains(message_of([&] { count_decode_kernel(s, {.warps = 0}); }), "warps = 0"));
  CHECK(contains(message_of([&] { count_decode_kernel(s, {.keys_per_step = 64, .sm_count = -1}); }),
                 "sm_count = -1"));
}

// One block's SRAM: the ring of K and V tiles, or the warps' states at the merge when they
// need more; none booked without stages.
TEST_CASE("decode mirror: a split block's SRAM is its ring of tiles or its merge, the larger") {
  const DecodeShape s{.lengths = {1000}, .heads_kv = 2, .group = 4, .d = 128};
  // 3 stages x (K, V) x 64 keys x 128 x 2 bytes = 96 KiB; 4 warps x 16 rows x 130 x 4 = 32.5 KiB.
  const DecodeKernelFacts ring{.keys_per_step = 64, .rows_per_block = 16, .stages = 3, .warps = 4};
  CHECK(count_decode_kernel(s, ring).peak_sram == 98304);
  // 1 stage of 16 keys = 8 KiB of tiles: the merge's 33280 bytes decide.
  const DecodeKernelFacts merge{.keys_per_step = 16, .rows_per_block = 16, .stages = 1, .warps = 4};
  CHECK(count_decode_kernel(s, merge).peak_sram == 33280);
  CHECK(count_decode_kernel(s, {.keys_per_step = 64, .rows_per_block = 16}).peak_sram == 0);
}

TEST_CASE("decode mirror: the lengths, a sector of 8 sequences once an SM that runs their blocks") {
  // The split grid: B H_kv R S blocks, each reading its sequence's int32 length through its
  // SM's L1. Measured (docs/IO-LEVELS.md, "Decode's lengths"): 32 bytes a block while the
  // blocks fit the SMs, 132 sectors at 256 blocks on 132 SMs.
  const auto lengths_read = [](Index batch, Index splits, Index sm_count, Index persistent) {
    DecodeShape s{.heads_kv = 8, .group = 4, .n_q = 1, .d = 128};
    s.lengths.assign(std::size_t(batch), 4096);
    const DecodeKernelFacts f{.splits = splits,
                              .keys_per_step = 64,
                              .persistent_blocks = persistent,
                              .sm_count = sm_count};
    return count_decode_kernel(s, f).tensor("lengths").read;
  };
  CHECK(lengths_read(1, 2, 132, 0) == 16 * 32);    // 8 KV heads x 2 splits
  CHECK(lengths_read(1, 16, 132, 0) == 128 * 32);  // 128 blocks, each on an SM of its own
  CHECK(lengths_read(8, 2, 132, 0) == 128 * 32);
  CHECK(lengths_read(8, 4, 132, 0) == 132 * 32);  // 256 blocks: one sector an SM
  CHECK(lengths_read(2, 16, 132, 0) == 132 * 32);
  CHECK(lengths_read(8, 4, 0, 0) == 256 * 32);  // no SM count: a sector a block
  // 20 sequences, three sectors of 8, 8 and 4 sequences: one split, 64, 64 and 32 blocks;
  // 8 splits, 512, 512 and 256, more than the SMs.
  CHECK(lengths_read(20, 1, 132, 0) == (64 + 64 + 32) * 32);
  CHECK(lengths_read(20, 1, 50, 0) == (50 + 50 + 32) * 32);
  CHECK(lengths_read(20, 8, 132, 0) == 3 * 132 * 32);
  // The queue grid: a sector's blocks are at most the queue's (min(items, persistent)).
  CHECK(lengths_read(8, 4, 132, 264) == 132 * 32);
  CHECK(lengths_read(8, 4, 132, 100) == 100 * 32);
  CHECK(lengths_read(20, 8, 132, 40) == 3 * 40 * 32);
}

TEST_CASE("decode mirror: the block table's reads, the sectors of each split's entries") {
  // Worked by hand, the shape an H100 read (bench/results/h100/2026-12-06-h100-unseen2-dec-
  // paged.csv): 4 sequences of 12,288 keys in pages of 64, 16 splits of 768 keys, 4 KV heads.
  // A row of the table is 192 entries (768 bytes, 24 sectors); a split's 12 entries are 48
  // bytes at 48 s, over two sectors whichever s: 64 bytes a block, 256 blocks, 16,384 bytes
  // (the H100: 16,384 more into the SMs than the contiguous cache, where 12 x 4 bytes a block
  // had booked 12,288). With 12 splits (1,024 keys, 16 entries, 64 bytes from 64 s) every
  // split's entries are two whole sectors: the same as 4 bytes an entry.
  const DecodeShape s{
      .lengths = {12288, 12288, 12288, 12288}, .heads_kv = 4, .group = 4, .n_q = 1, .d = 64};
  CHECK(count_decode_kernel(s, {.splits = 16, .keys_per_step = 64, .page_size = 64})
            .tensor("block table")
            .read == 4 * 16 * 4 * 2 * 32);
  CHECK(count_decode_kernel(s, {.splits = 12, .keys_per_step = 64, .page_size = 64})
            .tensor("block table")
            .read == 4 * 12 * 4 * 16 * 4);
  // A shorter sequence keeps the longest's row: the second sequence's row starts at 768
  // bytes whatever its own length.
  const DecodeShape ragged{.lengths = {12288, 64}, .heads_kv = 1, .group = 1, .n_q = 1, .d = 64};
  // Sequence 0: 16 splits x 2 sectors; sequence 1: one split, one entry, one sector.
  CHECK(count_decode_kernel(ragged, {.splits = 16, .keys_per_step = 64, .page_size = 64})
            .tensor("block table")
            .read == (16 * 2 + 1) * 32);
}

TEST_CASE("decode mirror: DRAM from a cold L2, launch by launch, worked by hand") {
  // 3 sequences of 0, 97 and 4096 keys, 2 KV heads, a group of 4, one query, d = 128, bf16,
  // 4 splits, pages of 64 tokens, the states padded to 136 floats.
  const DecodeShape s{.lengths = {0, 97, 4096}, .heads_kv = 2, .group = 4, .n_q = 1, .d = 128};
  const DecodeKernelFacts f{.splits = 4,
                            .keys_per_step = 64,
                            .page_size = 64,
                            .state_floats = padded(128),
                            .stores = kAsBuilt};
  const PassReport r = count_decode_kernel(s, f);
  REQUIRE(r.launches.size() == 2);
  // The split kernel: Q of the 2 sequences with keys, 2 x 2 x 4 rows of 256 bytes (the empty
  // one's splits read nothing); K and V 4193 keys x 2 heads x 256 bytes
  // each, every key once though the 4 splits read them; the block table 0 + 2 + 64 pages of
  // 4 bytes, once though 2 KV heads and the splits' boundaries read entries again.
  // The lengths: one sector (3 int32s).
  const Bytes q = 2 * 2 * 4 * 256, kv = 4193 * 2 * 256, table = (0 + 2 + 64) * 4, lengths = 32;
  // The states: 3 x 2 x 4 splits x 4 rows of 136 floats.
  const Bytes states = 3 * 2 * 4 * 4 * 136 * 4;
  CHECK(compulsory_dram(r.launch("split"), Bytes{1} << 30).read == q + 2 * kv + lengths + table);
  CHECK(compulsory_dram(r.launch("combine"), Bytes{1} << 30).read == states);
  // Its reads into the SMs are more: Q once a working split, the table's entries again.
  CHECK(r.launch("split").reads.size() == 5);
  CHECK(r.tensor("Q").read > q);
  CHECK(r.tensor("block table").read > table);
  // O (3 x 2 x 4 rows of 256 bytes) and LSE (24 floats) from the combine.
  const Bytes rows_out = 24 * 256 + 24 * 4;
  const auto all = compulsory_dram(r, Bytes{1} << 30);
  REQUIRE(all);
  CHECK(all->read == q + 2 * kv + lengths + table + states);
  CHECK(all->written == 0);  // everything written stays dirty in an L2 that holds it
  // An L2 that holds 1000 bytes dirty: each launch writes back what it writes beyond them.
  const auto small = compulsory_dram(r, 1000);
  REQUIRE(small);
  CHECK(small->written == (states - 1000) + (rows_out - 1000));
  CHECK(small->read == all->read);

  // A lone split: one launch reads Q, K and V and writes O and LSE; no states either way.
  DecodeKernelFacts lone = f;
  lone.splits = 1;
  lone.split_ends_rows = true;
  lone.page_size = 0;
  const auto one = compulsory_dram(count_decode_kernel(s, lone), 1000);
  REQUIRE(one);
  CHECK(one->read == q + 2 * kv + lengths);
  CHECK(one->written == rows_out - 1000);

  // A pass whose launch books no footprint has no figure.
  PassReport bare = r;
  bare.launches.push_back(Launch{"extra", 1, 1});
  CHECK_FALSE(compulsory_dram(bare, 1000));
}

}  // namespace flashlab::sim::test

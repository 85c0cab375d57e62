// Sectors touched by a warp's store (warp_store.hpp), against patterns worked out by hand:
// which 32-byte sectors each lane's bytes land in, counted lane by lane here.
#include "helpers.hpp"

#include "flashlab/sim/warp_store.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

namespace flashlab::sim::test {

namespace {

// The distinct sectors of one instruction, lane by lane: lane t writes bytes_per_thread bytes
// at run (t / lanes_per_run), position t % lanes_per_run; run r starts at r * row_pitch +
// offset (rows far apart: row_pitch a multiple of 32).
Bytes sectors_lane_by_lane(const WarpStore& s, Bytes offset, Bytes row_pitch) {
  std::set<Bytes> sectors;
  const int lanes_per_run = s.threads / s.runs;
  for (int t = 0; t < s.threads; ++t) {
    const Bytes first =
        (t / lanes_per_run) * row_pitch + offset + Bytes{t % lanes_per_run} * s.bytes_per_thread;
    for (Bytes byte = first; byte < first + s.bytes_per_thread; ++byte)
      sectors.insert(byte / kSectorBytes);
  }
  return Bytes(sectors.size());
}

}  // namespace

TEST_CASE("warp store: the hand-worked patterns") {
  // 32 lanes, 4 bytes each, consecutive: 128 bytes, 4 sectors (exact).
  CHECK(sectors_touched(WarpStore{4, 32, 1}) == 4);
  // The mma fragment: 4 bytes a lane over 8 rows, 16 bytes a row: 8 sectors for 128 bytes.
  CHECK(sectors_touched(WarpStore{4, 32, 8}) == 8);
  CHECK(bytes_out(WarpStore{4, 32, 8}, 128) == 256);
  // A lane per row, 2 bytes each: 32 sectors, 1024 bytes for 64: 16x.
  CHECK(sectors_touched(WarpStore{2, 32, 32}) == 32);
  CHECK(bytes_out(WarpStore{2, 32, 32}, 64) == 1024);
  // red.global.add.v4.f32, lane pairs per row, 16 rows: 16 full sectors.
  CHECK(sectors_touched(WarpStore{16, 32, 16}) == 16);
  CHECK(bytes_out(WarpStore{16, 32, 16}, 512) == 512);
  // One lane, one float: a whole sector for 4 bytes.
  CHECK(bytes_out(WarpStore{4, 1, 1}, 4) == 32);
  // 8 lanes of a quad each, one float a row, 8 consecutive rows: one sector.
  CHECK(sectors_touched(WarpStore{4, 8, 1}) == 1);
  // 128 bytes starting 8 bytes into a sector: 5 sectors.
  CHECK(sectors_touched(WarpStore{4, 32, 1}, 8) == 5);
  CHECK(sectors_touched(8, 128) == 5);
  CHECK(sectors_touched(24, 8) == 1);
  CHECK(sectors_touched(28, 8) == 2);
  CHECK(sectors_touched(0, 0) == 0);
}

TEST_CASE("warp store: the count equals the lanes' sectors for every pattern and offset") {
  for (const int bytes : {1, 2, 4, 8, 16})
    for (const int threads : {1, 2, 4, 8, 16, 17, 32})
      for (int runs = 1; runs <= threads; ++runs) {
        if (threads % runs != 0) continue;
        const WarpStore s{bytes, threads, runs};
        for (const Bytes offset : {0, 4, 8, 24, 31}) {
          CAPTURE(bytes);
          CAPTURE(threads);
          CAPTURE(runs);
          CAPTURE(offset);
          CHECK(sectors_touched(s, offset) == sectors_lane_by_lane(s, offset, 1024));
        }
      }
}

TEST_CASE("warp store: bytes out of a tile's stretch, whole runs and a partial last one") {
  // fa2's L: 8 floats a run; 17 rows (a ragged last tile) touch 3 sectors.
  CHECK(bytes_out(WarpStore{4, 8, 1}, 17 * 4) == 3 * 32);
  // The scalar kernel's O row of d = 64 bf16: 64 instructions, a sector each per row.
  CHECK(bytes_out(WarpStore{2, 32, 32}, 64 * 2) == 64 * 32);
  // fp32: 8x.
  CHECK(bytes_out(WarpStore{4, 32, 32}, 1000 * 4) == 8 * 1000 * 4);
  // Nothing stored costs nothing.
  CHECK(bytes_out(WarpStore{4, 32, 8}, 0) == 0);
}

TEST_CASE("warp store: runs from an offset, and heads laid end to end") {
  // fa2's L (8 floats a run) 4 bytes into a sector: each whole run touches 2 sectors; 17 rows
  // (two runs and a float) 5.
  CHECK(bytes_out(WarpStore{4, 8, 1}, 17 * 4, 4) == 5 * 32);
  CHECK(bytes_out(WarpStore{4, 8, 1}, 17 * 4, 0) == bytes_out(WarpStore{4, 8, 1}, 17 * 4));
  // Three heads of L at N_q = 777 (the rows of one head: 97 runs and one float): head 0 from
  // the boundary, 98 sectors; head 1 from byte 3108 (4 past a boundary) and head 2 from 6216
  // (8 past), 97 x 2 + 1 = 195 each: 488 in all, for 9,324 bytes of data (292 sectors' worth).
  CHECK(bytes_out_of_heads(WarpStore{4, 8, 1}, 777 * 4, 3) == 488 * 32);
  // Where 8 divides N_q every head starts on a boundary: the heads times one head.
  CHECK(bytes_out_of_heads(WarpStore{4, 8, 1}, 1024 * 4, 5) == 5 * 128 * 32);
  CHECK(bytes_out_of_heads(WarpStore{4, 8, 1}, 0, 3) == 0);
  CHECK(bytes_out_of_heads(WarpStore{4, 8, 1}, 4, 0) == 0);
}

TEST_CASE("warp store: heads laid end to end, against their lanes' sectors") {
  // A (heads, n) fp32 tensor whose rows a store pattern writes a run at a time (each run
  // `rows_per_run` consecutive rows of one head, the last run of a head partial), counted
  // instruction by instruction from the bytes each lane writes.
  const auto lanes_sectors = [](const WarpStore& s, Bytes n, Bytes heads) {
    const Bytes rows_per_run = s.run_bytes() / 4;
    Bytes total = 0;
    for (Bytes h = 0; h < heads; ++h)
      for (Bytes first = 0; first < n; first += rows_per_run) {
        std::set<Bytes> sectors;
        for (Bytes row = first; row < std::min(n, first + rows_per_run); ++row)
          for (Bytes byte = (h * n + row) * 4; byte < (h * n + row + 1) * 4; ++byte)
            sectors.insert(byte / kSectorBytes);
        total += Bytes(sectors.size());
      }
    return total * kSectorBytes;
  };
  for (const WarpStore s : {WarpStore{4, 8, 1}, WarpStore{4, 32, 1}, WarpStore{4, 1, 1}})
    for (const Bytes n : {1, 7, 8, 97, 777, 1023})
      for (const Bytes heads : {1, 2, 3, 5, 9}) {
        CAPTURE(s.threads);
        CAPTURE(n);
        CAPTURE(heads);
        CHECK(bytes_out_of_heads(s, n * 4, heads) == lanes_sectors(s, n, heads));
      }
}

TEST_CASE("warp store: impossible patterns are refused with what would be right") {
  CHECK_THROWS_WITH_AS(check(WarpStore{0, 32, 1}), doctest::Contains("a lane stores 1 to 16"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check(WarpStore{32, 32, 1}), doctest::Contains("a lane stores 1 to 16"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check(WarpStore{4, 33, 1}), doctest::Contains("1 to 32 active lanes"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check(WarpStore{4, 0, 1}), doctest::Contains("1 to 32 active lanes"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check(WarpStore{4, 32, 3}), doctest::Contains("the runs must divide"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(check(WarpStore{4, 8, 16}), doctest::Contains("the runs must divide"),
                       cpu::InvalidArgument);
  CHECK_THROWS_AS(bytes_out(WarpStore{4, 32, 0}, 128), cpu::InvalidArgument);
  // A problem that carries one is refused the same way.
  Problem p;
  p.o_store = WarpStore{4, 32, 5};
  CHECK_THROWS_WITH_AS(check(p), doctest::Contains("the runs must divide"), cpu::InvalidArgument);
}

}  // namespace flashlab::sim::test

// Sectors touched by a warp's store (warp_store.hpp), against patterns worked out by hand:
// which 32-byte sectors each lane's bytes land in, counted lane by lane here.
#include "helpers.hpp"

#include "flashlab/sim/warp_store.hpp"

#include <doctest/doctest.h>

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

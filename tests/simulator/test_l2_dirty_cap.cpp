// The L2's dirty cap (Problem::l2_dirty_cap, GridProblem::l2_dirty_cap, l2_cache.hpp): an L2
// that holds at most so many bytes dirty writes its oldest dirty lines back when a write would
// take it past the cap, and keeps them, clean. Worked by hand in small L2s of both kinds
// (tiles under LRU; 128-byte lines in one hashed set), one tensor a tile so that each
// tensor's dram_written says which tile went to DRAM when; a grid whose written bytes are
// conserved with and without the cap; the H200's measured cap against the fills it comes from; and
// caps that no L2 can have, refused.
#include "helpers.hpp"

#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/l2_policy.hpp"
#include "flashlab/sim/machine.hpp"
#include "flashlab/sim/profiles.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace flashlab::sim::test {

namespace {

// Tiles of 100 bytes (25 fp32), an L2 of 7 of them, a cap of 2.5: two tiles stay dirty, the
// third written sends the oldest of them to DRAM.
constexpr cpu::Index kTileFloats = 25;
constexpr Bytes kTile = 4 * kTileFloats;
constexpr Bytes kTileL2 = 7 * kTile;
constexpr Bytes kTileCap = 2 * kTile + kTile / 2;

struct TileL2 {
  Machine m;
  std::vector<Machine::TensorId> w;  // W0 .. W3: one tile each
  Machine::TensorId r;                // 7 tiles, to read the L2 full of something else
  explicit TileL2(Bytes cap) : m(Machine::kUnbounded, kTileL2, L2Replacement::lru, 0, 1, cap) {
    for (int t = 0; t < 4; ++t)
      w.push_back(m.add_tensor("W" + std::to_string(t), 1, kTileFloats, DType::fp32));
    r = m.add_tensor("R", 7, kTileFloats, DType::fp32);
  }
  void write(int t) { m.write_through(w[std::size_t(t)], 0, kTile); }
  Bytes written(int t) const { return m.traffic()[std::size_t(w[std::size_t(t)])].dram_written; }
  Bytes read(int t) const { return m.traffic()[std::size_t(w[std::size_t(t)])].dram_read; }
  // The four tensors' DRAM writes, as text: what a failed check prints.
  std::string written_all() const {
    return fmt::format("{} {} {} {}", written(0), written(1), written(2), written(3));
  }
};

std::string four(Bytes a, Bytes b, Bytes c, Bytes d) { return fmt::format("{} {} {} {}", a, b, c, d); }

}  // namespace

TEST_CASE("dirty cap, tiles under LRU: the oldest dirty tile goes to DRAM at the cap") {
  TileL2 l2(kTileCap);
  l2.write(0);
  l2.write(1);
  CHECK(l2.written_all() == four(0, 0, 0, 0));  // 200 bytes dirty, within 250
  l2.write(2);                                                 // 300: W0, the oldest, goes
  CHECK(l2.written_all() == four(kTile, 0, 0, 0));
  // W1 written again while dirty keeps its place in the order: it is still the oldest dirty
  // tile, so W3 sends it (not W2, the one written less recently) to DRAM.
  l2.write(1);
  CHECK(l2.written_all() == four(kTile, 0, 0, 0));
  l2.write(3);
  CHECK(l2.written_all() == four(kTile, kTile, 0, 0));

  SUBCASE("the tiles written back stay resident, clean") {
    l2.m.read_through(l2.w[0], 0, kTile);  // a hit: W0 was written, never fetched
    CHECK(l2.read(0) == 0);
    // Seven other tiles fill the L2 and evict all four: W2 and W3, dirty, are written back;
    // W0 and W1, clean, add nothing.
    for (cpu::Index row = 0; row < 7; ++row) l2.m.read_through(l2.r, row, kTile);
    CHECK(l2.written_all() == four(kTile, kTile, kTile, kTile));
    l2.m.finish();
    CHECK(l2.written_all() == four(kTile, kTile, kTile, kTile));
  }
  SUBCASE("the end's write-back books only what is still dirty") {
    l2.m.finish();
    CHECK(l2.written_all() == four(kTile, kTile, kTile, kTile));
  }
  SUBCASE("a clean tile written again is dirty again, and the newest in the order") {
    l2.write(0);  // W2, W3, W0 dirty: 300 bytes; W2 goes
    CHECK(l2.written_all() == four(kTile, kTile, kTile, 0));
    l2.m.finish();
    CHECK(l2.written_all() == four(2 * kTile, kTile, kTile, kTile));
  }
}

TEST_CASE("dirty cap 0 is no cap: every tile stays dirty until it is evicted") {
  TileL2 l2(0);
  for (int t = 0; t < 4; ++t) l2.write(t);
  CHECK(l2.written_all() == four(0, 0, 0, 0));
  l2.m.finish();
  CHECK(l2.written_all() == four(kTile, kTile, kTile, kTile));
}

TEST_CASE("dirty cap, 128-byte lines in one hashed set: the oldest lines go, a tile's in order") {
  // Tiles of 200 bytes: two lines, of 128 and 72 bytes. One set of kL2Ways lines; a cap of
  // 450 bytes holds two tiles (400) dirty, not a third line.
  constexpr cpu::Index kFloats = 50;
  constexpr Bytes kTileBytes = 4 * kFloats, kFirstLine = kL2LineBytes,
                  kSecondLine = kTileBytes - kL2LineBytes;
  constexpr Bytes kCap = 450;
  Machine m(Machine::kUnbounded, kL2Ways * kL2LineBytes, L2Replacement::sets, 3, 1, kCap);
  std::vector<Machine::TensorId> t;
  for (int k = 0; k < 3; ++k) t.push_back(m.add_tensor("T" + std::to_string(k), 1, kFloats,
                                                       DType::fp32));
  const auto other = m.add_tensor("R", kL2Ways, kL2LineBytes / 4, DType::fp32);
  const auto written = [&] {  // the three tensors' DRAM writes, as text
    const auto of = [&](int k) { return m.traffic()[std::size_t(t[std::size_t(k)])].dram_written; };
    return fmt::format("{} {} {}", of(0), of(1), of(2));
  };
  const auto three = [](Bytes a, Bytes b, Bytes c) { return fmt::format("{} {} {}", a, b, c); };
  m.write_through(t[0], 0, kTileBytes);
  m.write_through(t[1], 0, kTileBytes);
  CHECK(written() == three(0, 0, 0));
  // T2's first line takes the dirty bytes to 528: T0's first line (128) goes, 400 left; its
  // second to 472: T0's second line (72) goes.
  m.write_through(t[2], 0, kFirstLine);
  CHECK(written() == three(kFirstLine, 0, 0));
  m.write_through(t[2], 0, kTileBytes);
  CHECK(written() == three(kFirstLine + kSecondLine, 0, 0));
  // T0 stays: a read of it hits, nothing comes from DRAM.
  m.read_through(t[0], 0, kTileBytes);
  CHECK(m.traffic()[std::size_t(t[0])].dram_read == 0);
  // A full set of other lines evicts the three tiles: T1 and T2 written back, T0 not again.
  for (cpu::Index row = 0; row < kL2Ways; ++row) m.read_through(other, row, kL2LineBytes);
  CHECK(written() == three(kTileBytes, kTileBytes, kTileBytes));
  m.finish();
  CHECK(written() == three(kTileBytes, kTileBytes, kTileBytes));
}

TEST_CASE("dirty cap on a grid: the bytes written are conserved, at most the cap stays dirty") {
  // O is written once, so what the kernel writes back while it runs plus what it leaves dirty
  // is O and L whatever the cap; the cap moves bytes from the second to the first. It keeps
  // every line where it was, so the reads do not change. (Hashed sets with home copies.)
  for (const L2Replacement replacement : {L2Replacement::lru, L2Replacement::sets}) {
    GridProblem g{.N = 1023, .d = 59, .heads = 3, .Br = 64, .Bc = 32, .blocks_per_sm = 2,
                  .sm_count = 5, .l2_bytes = 3 * 97 * 1024, .l2_partitions = 3,
                  .replacement = replacement,
                  .l2_home_copies = replacement == L2Replacement::sets};
    CAPTURE(to_string(replacement));
    const GridReport none = run_grid(g);
    g.l2_dirty_cap = 11 * 1024 + 5;
    const GridReport capped = run_grid(g);
    Bytes dirty = 0, written_none = 0, written_capped = 0;
    for (std::size_t t = 0; t < capped.tensors.size(); ++t) {
      CAPTURE(capped.tensors[t].name);
      CHECK(capped.tensors[t].dram_read == none.tensors[t].dram_read);  // lines stay resident
      CHECK(capped.tensors[t].dram_written + capped.dirty_at_end[t] ==
            none.tensors[t].dram_written + none.dirty_at_end[t]);
      dirty += capped.dirty_at_end[t];
      written_none += none.tensors[t].dram_written;
      written_capped += capped.tensors[t].dram_written;
    }
    CHECK(dirty <= g.l2_partitions * g.l2_dirty_cap);
    CHECK(written_capped > written_none);
  }
}

TEST_CASE("the measured dirty caps: a fill writes back what it writes beyond the cap") {
  // bench/gpu/l2_dirty_writes.py's fills from 32 MiB, X MiB from every SM after a clean read,
  // on the H200 and on an H100: one partition of the profile's L2 (its replacement, its home
  // copies) with the measured cap takes half of each buffer, as dirty_writes_vs_measured runs
  // it. Within 0.25 MiB of every measured row: the two H200 runs of the 32 MiB fill differ by
  // 0.22 MiB.
  struct Measured {
    const char* profile;
    Bytes cap;
    std::vector<const char*> csvs;
  };
  for (const Measured& gpu :
       {Measured{"h200",
                 kH200MeasuredL2DirtyCap,
                 {"/2026-12-04-h200-l2-dirty-writes.csv",
                  "/2026-12-04-h200-l2-dirty-writes-repeat.csv"}},
        Measured{"h100", kH100MeasuredL2DirtyCap, {"/h100/2026-12-06-h100-l2-dirty-writes.csv"}}}) {
    CAPTURE(gpu.profile);
    const HardwareProfile& hw = find_profile(gpu.profile);
    constexpr Bytes kMiB = Bytes{1} << 20;
    constexpr cpu::Index kRowFloats = 16 * 1024;
    constexpr Bytes kRow = 4 * kRowFloats;
    const int parts = hw.l2_partitions;
    std::map<Bytes, std::vector<double>> measured;  // X (MiB): DRAM MiB written during the fill
    for (const char* name : gpu.csvs) {
      std::ifstream csv(std::string(FLASHLAB_RESULTS_DIR) + name);
      REQUIRE(csv);
      std::string line;
      std::getline(csv, line);
      while (std::getline(csv, line)) {
        const auto c1 = line.find(','), c2 = line.find(',', c1 + 1), c3 = line.find(',', c2 + 1);
        const Bytes x = std::stoll(line.substr(0, c1));
        if (line.substr(c1 + 1, c2 - c1 - 1) == "fill" && x >= 32)
          measured[x].push_back(std::stod(line.substr(c2 + 1, c3 - c2 - 1)) / double(kMiB));
      }
    }
    REQUIRE(measured.size() == 4);
    for (const auto& [x, rows] : measured) {
      Machine m(Machine::kUnbounded, hw.l2_bytes / parts, hw.l2_replacement, 1,
                hw.l2_home_copies ? parts : 1, gpu.cap);
      const Bytes flush_bytes = 2 * hw.l2_bytes / parts, fill_bytes = x * kMiB / parts;
      const auto flush = m.add_tensor("flush", flush_bytes / kRow, kRowFloats, DType::fp32);
      const auto fill = m.add_tensor("fill", fill_bytes / kRow, kRowFloats, DType::fp32);
      for (cpu::Index r = 0; r < flush_bytes / kRow; ++r) m.read_through(flush, r, kRow);
      for (cpu::Index r = 0; r < fill_bytes / kRow; ++r) m.write_through(fill, r, kRow);
      const double model =
          double(parts * m.traffic()[std::size_t(fill)].dram_written) / double(kMiB);
      for (const double row : rows) {
        CAPTURE(x);
        CHECK(std::abs(model - row) <= 0.25);
      }
    }
  }
}

TEST_CASE("a profile's dirty cap reaches the grid model, each partition's") {
  HardwareProfile gpu = find_profile("h200");
  CHECK(on_gpu(gpu, {}).l2_dirty_cap == gpu.l2_dirty_cap);
  gpu.l2_dirty_cap = 12'345;
  const GridProblem g = on_gpu(gpu, {});
  CHECK(g.l2_dirty_cap == 12'345);
  CHECK(with_replacement(gpu, g, L2Replacement::lru).l2_dirty_cap == 12'345);
}

TEST_CASE("a dirty cap that no L2 can have is refused, saying what would be right") {
  const auto machine = [](Bytes l2, Bytes cap) {
    return message_of([&] { Machine m(Machine::kUnbounded, l2, L2Replacement::lru, 0, 1, cap); });
  };
  for (const Bytes cap : {Bytes{-1}, Bytes{1001}}) {
    CAPTURE(cap);
    const std::string why = machine(1000, cap);
    CHECK(contains(why, "dirty cap of " + std::to_string(cap) + " bytes"));
    CHECK(contains(why, "give 0 for no cap, or 1 to 1000 bytes"));
  }
  CHECK(machine(1000, 1000).empty());  // all of it dirty: the L2 without a cap, named

  Problem p = problem(97, 59, DType::bf16, 64 * kKiB);
  p.l2_bytes = 4096;
  p.l2_dirty_cap = 4097;
  const std::string why = message_of([&] { check(p); });
  CHECK(contains(why, "l2_dirty_cap = 4097 bytes with an L2 of 4096 bytes"));
  CHECK(contains(why, "at most the L2's 4096 bytes"));
  p.l2_bytes = 0;  // no L2: no room for a cap either
  p.l2_dirty_cap = 1;
  CHECK(contains(message_of([&] { check(p); }), "give 0 for no cap"));

  GridProblem g{.l2_bytes = 3 * 1000 + 2, .l2_partitions = 3};
  for (const Bytes cap : {Bytes{-7}, Bytes{1001}}) {
    g.l2_dirty_cap = cap;
    const std::string grid_why = message_of([&] { check(g); });
    CAPTURE(grid_why);
    CHECK(contains(grid_why, "l2_dirty_cap = " + std::to_string(cap) + " bytes, a partition's"));
    CHECK(contains(grid_why, "at most a partition's 1000 bytes (3002 bytes in 3 partitions)"));
  }
}

}  // namespace flashlab::sim::test

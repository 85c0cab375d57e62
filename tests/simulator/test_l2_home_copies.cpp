// Home copies (Problem::l2_home_partitions, l2_cache.hpp): an L2 of hashed sets that stands for
// one of several partitions alike. A line homed elsewhere that is read from DRAM, or written,
// takes two ways (its own and its home copy); a read that misses its own copy finds the home
// copy without DRAM while it lasts; home copies are clean. Worked by hand in an L2 of one set,
// then against a small reference of the rule on random reads and writes; the naive softmax
// staggered as its blocks run, against the same softmax in step.
#include "helpers.hpp"

#include "flashlab/cpu/philox.hpp"
#include "flashlab/sim/l2_policy.hpp"
#include "flashlab/sim/machine.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

namespace flashlab::sim::test {

namespace {

constexpr Bytes kLine = kL2LineBytes;
constexpr Bytes kOneSet = kL2Ways * kLine;  // 16 lines: an L2 of one set
constexpr std::uint64_t kSeed = 11;
constexpr int kTensorT = 0;  // the first tensor a Machine is given
constexpr int kPartitions = 2;  // the L2 stands for one of two, as the H200's

// Rows of a tensor of one-line rows, the first `count` homed elsewhere (or here) by the rule.
std::vector<Index> rows_homed(bool here, int count) {
  std::vector<Index> rows;
  for (Index r = 0; int(rows.size()) < count; ++r)
    if (l2_line_homed_here(kTensorT, r, 0, kSeed, kPartitions) == here) rows.push_back(r);
  return rows;
}

// The rule in a few lines, for one set of kL2Ways ways: a way is (row, home copy or not), LRU
// by its last touch. Returns the DRAM bytes read and written by a sequence of one-line reads
// and writes, then a flush.
struct Reference {
  struct Way {
    Index row;
    bool copy, dirty;
    std::uint64_t used;
  };
  std::vector<Way> ways;
  std::uint64_t clock = 0;
  Bytes read = 0, written = 0;

  Way* find(Index row, bool copy) {
    for (Way& w : ways)
      if (w.row == row && w.copy == copy) return &w;
    return nullptr;
  }
  void place(Way w) {
    w.used = ++clock;
    if (int(ways.size()) < kL2Ways) return ways.push_back(w);
    Way& victim = *std::min_element(ways.begin(), ways.end(),
                                    [](const Way& a, const Way& b) { return a.used < b.used; });
    if (victim.dirty) written += kLine;
    victim = w;
  }
  void access(Index row, bool write) {
    if (Way* own = find(row, false)) {
      own->used = ++clock;
      own->dirty = own->dirty || write;
      return;
    }
    const bool elsewhere = !l2_line_homed_here(kTensorT, row, 0, kSeed, kPartitions);
    Way* copy = !write && elsewhere ? find(row, true) : nullptr;
    if (copy) copy->used = ++clock;
    if (!write && !copy) read += kLine;
    place({row, false, write, 0});
    if (elsewhere && !copy) place({row, true, false, 0});
  }
  void flush() {
    for (Way& w : ways) written += w.dirty ? kLine : 0, w.dirty = false;
  }
};

}  // namespace

TEST_CASE("home copies: the rule picks about one line in `partitions` as homed here") {
  for (int partitions : {1, 2, 4}) {
    int here = 0;
    for (Index r = 0; r < 4000; ++r) here += l2_line_homed_here(kTensorT, r, 0, kSeed, partitions);
    CAPTURE(partitions);
    CHECK(double(here) / 4000 == doctest::Approx(1.0 / partitions).epsilon(0.1));
  }
  CHECK_THROWS(l2_line_homed_here(kTensorT, 0, 0, kSeed, 0));
}

TEST_CASE("home copies: an L2 of one set, worked by hand") {
  Machine m(Machine::kUnbounded, kOneSet, L2Replacement::sets, kSeed, kPartitions);
  const auto T = m.add_tensor("T", 4000, kLine / 2, DType::bf16);  // a row: one line
  REQUIRE(T == kTensorT);
  const std::vector<Index> a = rows_homed(false, 8), b = rows_homed(true, 2);
  // Eight lines homed elsewhere: each read from DRAM once and placed twice, its own way and
  // its home copy's: the 16 ways are full (a0 own, a0 copy, a1 own, ..., a7 copy).
  for (Index r : a) m.read_through(T, r, kLine);
  CHECK(m.traffic()[T].dram_read == 8 * kLine);
  m.read_through(T, a[0], kLine);  // its own copy: a hit, the oldest way now a0's home copy
  // Two lines homed here: one way each, taking the two oldest (a0's copy, a1's own way).
  for (Index r : b) m.read_through(T, r, kLine);
  CHECK(m.traffic()[T].dram_read == 10 * kLine);
  // a1 lost its own way but its home copy stands: no DRAM, and it takes a way of its own
  // again (a2's own, the oldest).
  m.read_through(T, a[1], kLine);
  CHECK(m.traffic()[T].dram_read == 10 * kLine);
  // a2 the same; a0 kept its own way.
  m.read_through(T, a[2], kLine);
  m.read_through(T, a[0], kLine);
  CHECK(m.traffic()[T].dram_read == 10 * kLine);
  // Without home copies the same reads keep all ten lines in the 16 ways.
  Machine one(Machine::kUnbounded, kOneSet, L2Replacement::sets, kSeed, 1);
  const auto T1 = one.add_tensor("T", 4000, kLine / 2, DType::bf16);
  for (Index r : a) one.read_through(T1, r, kLine);
  for (Index r : b) one.read_through(T1, r, kLine);
  CHECK(one.traffic()[T1].dram_read == 10 * kLine);
  // Twelve lines homed elsewhere take 24 ways, so a second pass in the same order finds
  // none of its own (a cyclic stream through LRU) and none of the oldest home copies.
  Machine twelve(Machine::kUnbounded, kOneSet, L2Replacement::sets, kSeed, kPartitions);
  const auto T12 = twelve.add_tensor("T", 4000, kLine / 2, DType::bf16);
  const std::vector<Index> c = rows_homed(false, 12);
  for (int pass = 0; pass < 2; ++pass)
    for (Index r : c) twelve.read_through(T12, r, kLine);
  CHECK(twelve.traffic()[T12].dram_read == 24 * kLine);
}

TEST_CASE("home copies: written lines are written back once, their home copies clean") {
  Machine m(Machine::kUnbounded, kOneSet, L2Replacement::sets, kSeed, kPartitions);
  const auto T = m.add_tensor("T", 4000, kLine / 2, DType::bf16);
  const std::vector<Index> a = rows_homed(false, 12);
  for (Index r : a) m.write_through(T, r, kLine);  // 24 ways asked of 16: 8 written back
  CHECK(m.traffic()[T].dram_read == 0);
  m.finish();
  CHECK(m.traffic()[T].dram_written == 12 * kLine);
}

TEST_CASE("home copies: an L2 of one set against the rule's reference, random traffic") {
  for (std::uint64_t trial = 0; trial < 20; ++trial) {
    CAPTURE(trial);
    Machine m(Machine::kUnbounded, kOneSet, L2Replacement::sets, kSeed, kPartitions);
    const auto T = m.add_tensor("T", 64, kLine / 2, DType::bf16);
    Reference ref;
    for (std::uint32_t i = 0; i < 400; ++i) {
      const auto word = cpu::philox4x32_10({i, std::uint32_t(trial), 0, 0}, cpu::philox_key(7));
      const Index row = word[0] % 24;  // 24 lines for 16 ways: hits, far hits and misses
      const bool write = word[1] % 4 == 0;
      (write ? m.write_through(T, row, kLine) : m.read_through(T, row, kLine));
      ref.access(row, write);
    }
    m.finish();
    ref.flush();
    CHECK(m.traffic()[T].dram_read == ref.read);
    CHECK(m.traffic()[T].dram_written == ref.written);
  }
}

TEST_CASE("home copies: only in an L2 of hashed sets") {
  Problem p = problem(1024, 64, DType::bf16, 192 * kKiB);
  p.l2_bytes = 4 << 20;
  p.l2_replacement = L2Replacement::lru;
  p.l2_home_partitions = kPartitions;
  CHECK_THROWS_WITH_AS(check(p), doctest::Contains("only in an L2 of hashed sets"),
                       cpu::InvalidArgument);
  p.l2_home_partitions = 0;
  CHECK_THROWS_WITH_AS(check(p), doctest::Contains("at least 1 partition"), cpu::InvalidArgument);
  p.l2_replacement = L2Replacement::sets;
  p.l2_home_partitions = kPartitions;
  CHECK_NOTHROW(check(p));
}

TEST_CASE("naive-kernel softmax staggered: the same bytes in and out of the SMs, S's passes "
          "from DRAM between in step's and all") {
  // N = 64, bf16, fp32 S: a row of S 256 bytes. An L2 of 1400 bytes, R = 5 rows in flight.
  for (Index R : {1, 4, 5, 6, 64}) {
    CAPTURE(R);
    Problem p = problem(64, 16, DType::bf16, 192 * kKiB);
    p.score_reads = 3;
    p.l2_emptied_between_kernels = true;
    p.softmax_rows_in_flight = R;
    p.l2_bytes = 1400;
    const Report in_step = count(Algorithm::naive_kernel, p);
    p.softmax_staggered = true;
    const Report staggered = count(Algorithm::naive_kernel, p);
    CHECK(staggered.bytes_total() == in_step.bytes_total());  // the SMs' side: no change
    const Bytes S = 64 * 256;
    CHECK(staggered.tensor("S").dram_read >= S);
    CHECK(staggered.tensor("S").dram_read <= 3 * S);
    // One row at a time is one order either way; all rows at once lose every later pass
    // either way.
    if (R == 1 || R == 64) CHECK(staggered.tensor("S").dram_read == in_step.tensor("S").dram_read);
  }
}

TEST_CASE("naive-kernel softmax staggered, worked by hand: P between a row's passes") {
  // N = 4, bf16: a row of S 16 bytes (fp32), of P 8, of L 4. R = 2 rows in flight, an L2 of
  // 32 bytes (two rows of S), LRU over tiles, the softmax starting cold.
  // In step (rows 0 and 1, then 2 and 3): both rows' first and second passes hit the two
  // rows of S; on the third, P0 and L0 push S1 out, so row 1's third pass misses: 16 bytes
  // again a group, 64 + 2 x 16 = 96.
  // Staggered (slot 0 takes rows 0 and 2 from step 0, slot 1 rows 1 and 3 from step 1):
  //   step 2: row 0's third pass writes P0 and L0, pushing S1 out; row 1's second pass misses;
  //   step 3: row 2's first pass pushes P0, L0 out; row 1's third pass hits, its P1 pushes
  //           S2 out;
  //   step 4: row 2's second pass misses, pushing S1 out; row 3's first pass;
  //   step 5: row 2's third pass hits, P2 pushes S3 out; row 3's second pass misses;
  //   step 6: row 3's third pass hits.
  // Three passes miss: 64 + 3 x 16 = 112.
  Problem p = problem(4, 16, DType::bf16, 192 * kKiB);
  p.score_reads = 3;
  p.l2_emptied_between_kernels = true;
  p.softmax_rows_in_flight = 2;
  p.l2_bytes = 32;
  CHECK(count(Algorithm::naive_kernel, p).tensor("S").dram_read == 96);
  p.softmax_staggered = true;
  CHECK(count(Algorithm::naive_kernel, p).tensor("S").dram_read == 112);
}

}  // namespace flashlab::sim::test

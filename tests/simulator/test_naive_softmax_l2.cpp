// The naive kernel's softmax through an L2 as the GPU runs it: R rows of S in flight (its
// resident blocks), pass by pass (naive_kernel_program.cpp, run_softmax). Which of a row's
// later passes find it in the L2, in closed form, against the mirror: a case worked by hand,
// random problems at awkward sizes, and the H200's transition, where the rows in flight
// outgrow one partition of its L2.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>

namespace flashlab::sim::test {

namespace {

// The softmax of the naive kernel as measured: three passes, each launch starting cold.
Problem softmax_problem(Index N, Index d, Index rows_in_flight, Bytes l2_bytes) {
  Problem p = problem(N, d, DType::bf16, 192 * kKiB);
  p.score_reads = 3;
  p.l2_emptied_between_kernels = true;
  p.softmax_rows_in_flight = rows_in_flight;
  p.l2_bytes = l2_bytes;
  return p;
}

// S's DRAM reads by run_softmax's closed form. The softmax starts with an empty L2 (and the
// GEMMs never read S), so every row's first pass comes from DRAM; a later pass of row i of
// its group (from 0) comes from DRAM when the group's visible scores (sum_s), and on the last
// pass the P and L of the i rows before it too, do not fit in C.
Bytes closed_form_S_dram_read(const Problem& p) {
  const Bytes s = bytes_of(p.score_dtype), w = bytes_of(p.weight_dtype.value_or(p.dtype));
  const Bytes l = 4;  // L, one float a row
  const Index N = p.N, R = p.softmax_rows_in_flight;
  const auto visible = [&](Index r) { return p.causal == cpu::Causal::none ? N : r + 1; };
  Bytes read = 0;
  for (Index r0 = 0; r0 < N; r0 += R) {
    const Index r1 = std::min(r0 + R, N);
    Bytes sum_s = 0;
    for (Index r = r0; r < r1; ++r) sum_s += visible(r) * s;
    for (Index r = r0; r < r1; ++r) {
      const Bytes s_r = visible(r) * s, i = r - r0;
      read += s_r;  // pass 1
      if (p.score_reads == 1) continue;
      if (sum_s > p.l2_bytes) read += (p.score_reads - 2) * s_r;  // passes 2 .. last - 1
      if (sum_s + i * (N * w + l) > p.l2_bytes) read += s_r;      // the last pass
    }
  }
  return read;
}

}  // namespace

TEST_CASE("naive-kernel softmax, R rows in flight through a tiny L2: worked by hand") {
  // N = 64, d = 16, bf16, fp32 S: a row of S is 256 bytes, of P 128, of L 4. An L2 of 1400
  // bytes. R rows in flight take each pass together; a row's second pass hits when the R rows
  // of S fit (R x 256 <= 1400: R <= 5), its third when they and the P and L of the i rows
  // before it in the group do (R x 256 + i x 132 <= 1400).
  constexpr Bytes kRowS = 256, kL2 = 1400;
  const Bytes S = 64 * kRowS;
  const auto S_dram = [&](Index R) {
    return count(Algorithm::naive_kernel, softmax_problem(64, 16, R, kL2)).tensor("S").dram_read;
  };
  // One row after another (as one SM would): every later pass hits, S is read once.
  CHECK(S_dram(1) == S);
  // R = 4: 1024 bytes of S; third passes hit for i = 0, 1, 2 (1024, 1156, 1288) but not 3
  // (1420): one row of each of the 16 groups is read a second time.
  CHECK(S_dram(4) == S + 16 * kRowS);
  // R = 5: 1280 bytes; third passes hit only for i = 0 (1412 > 1400 at i = 1): 4 of 5 rows in
  // each of the 12 whole groups come back, and in the last group of 4 rows (as R = 4) one.
  CHECK(S_dram(5) == S + (12 * 4 + 1) * kRowS);
  // R = 6: 1536 bytes do not fit: every row of the 10 whole groups is read three times from
  // DRAM; the last group, 4 rows, as R = 4.
  CHECK(S_dram(6) == S + 60 * 2 * kRowS + kRowS);
  // All 64 rows at once: every pass from DRAM.
  CHECK(S_dram(64) == 3 * S);
  CHECK(S_dram(1000) == 3 * S);  // more rows in flight than the problem has: all of them
  // The order moves no byte on the SMs' side, and leaves the other tensors' reads alone.
  const Report one = count(Algorithm::naive_kernel, softmax_problem(64, 16, 1, kL2));
  const Report six = count(Algorithm::naive_kernel, softmax_problem(64, 16, 6, kL2));
  CHECK(six.bytes_total() == one.bytes_total());
  CHECK(six.dram_read() - six.tensor("S").dram_read == one.dram_read() - one.tensor("S").dram_read);
}

TEST_CASE("naive-kernel softmax in flight: the mirror is the closed form at awkward sizes") {
  auto rng = fresh_rng();
  constexpr DType kAll[] = {DType::fp32, DType::bf16, DType::fp16};
  for (const Index N : {1, 17, 97, 113, 1023})
    for (const cpu::Causal causal : {cpu::Causal::none, cpu::Causal::top_left})
      for (int trial = 0; trial < 4; ++trial) {
        const Index R = std::uniform_int_distribution<Index>(1, N + 5)(rng);
        Problem p = softmax_problem(N, std::uniform_int_distribution<Index>(1, 70)(rng), R, 1);
        p.causal = causal;
        p.score_dtype = kAll[rng() % 3];
        p.weight_dtype = kAll[rng() % 3];
        p.score_reads = std::uniform_int_distribution<Index>(1, 4)(rng);
        // From below one row of P (+ L) to a few groups' worth of S: every regime.
        const Bytes w_row = N * bytes_of(*p.weight_dtype) + 4;
        p.l2_bytes = std::uniform_int_distribution<Bytes>(
            w_row, 3 * R * N * bytes_of(p.score_dtype) + R * w_row)(rng);
        CAPTURE(N);
        CAPTURE(R);
        CAPTURE(p.l2_bytes);
        CAPTURE(p.score_reads);
        CAPTURE(to_string(p.score_dtype));
        CAPTURE(to_string(*p.weight_dtype));
        CAPTURE(to_string(causal));
        const Report r = count(Algorithm::naive_kernel, p);
        CHECK(r.tensor("S").dram_read == closed_form_S_dram_read(p));
        p.softmax_rows_in_flight = 1;
        CHECK(count(Algorithm::naive_kernel, p).bytes_total() == r.bytes_total());
      }
}

TEST_CASE("naive-kernel softmax on the H200: rows in flight just under and over a partition") {
  // Half the resident blocks of a softmax of 256 threads with 32 bytes of shared memory (the
  // naive kernel's; the bridge's test checks that it takes them from the kernel table), on
  // one partition's 30 MiB: 528 rows.
  const HardwareProfile& hw = find_profile("h200");
  const Index R =
      Index(hw.sm_count) * blocks_by_shared_and_threads(hw.sm, 256, 32) / hw.l2_partitions;
  const Bytes C = hw.l2_bytes / hw.l2_partitions;
  CHECK(R == 528);
  // Second passes hit while R rows of S (4N bytes each) fit: N <= C / 4R; third passes also
  // while the P and L (2N + 4 bytes) of the R - 1 rows before the group's last fit beside
  // them: N <= (C - 4 (R - 1)) / (4R + 2 (R - 1)).
  const Index n_second = C / (4 * R);
  const Index n_third = (C - 4 * (R - 1)) / (4 * R + 2 * (R - 1));
  CHECK(n_second == 14894);
  CHECK(n_third == 9935);
  const auto S_dram = [&](Index N) {
    const Problem p = softmax_problem(N, 128, R, C);
    const Report r = count(Algorithm::naive_kernel, p);
    CHECK(r.tensor("S").dram_read == closed_form_S_dram_read(p));
    return double(r.tensor("S").dram_read) / double(r.tensor("S").written);
  };
  CHECK(S_dram(n_third) == 1.0);  // just under: S comes from DRAM once
  // Just over: the last row of each whole group misses its third pass (18 groups of 528 and
  // one of 432, which fits): 18 rows more.
  CHECK(S_dram(n_third + 1) == doctest::Approx(1.0 + 18.0 / (n_third + 1)));
  // Just under the second threshold the second passes all hit and most third passes miss;
  // just over it every pass of the whole groups misses (28 groups of 528 and one of 111).
  const double under = S_dram(n_second), over = S_dram(n_second + 1);
  CHECK(under > 1.8);
  CHECK(under < 2.0);
  CHECK(over == doctest::Approx(3.0 - 2.0 * 111 / (n_second + 1)));
}

TEST_CASE("naive-kernel softmax: rows in flight below one are refused with what would be right") {
  Problem p = softmax_problem(64, 16, 0, 1 << 20);
  for (const Index rows : {Index{0}, Index{-3}}) {
    p.softmax_rows_in_flight = rows;
    const std::string what = message_of([&] { count(Algorithm::naive_kernel, p); });
    CAPTURE(what);
    CHECK(contains(what, "softmax_rows_in_flight = " + std::to_string(rows)));
    CHECK(contains(what, "at least one row of S in flight"));
  }
  p.softmax_rows_in_flight = 1;
  CHECK_NOTHROW(count(Algorithm::naive_kernel, p));
}

}  // namespace flashlab::sim::test

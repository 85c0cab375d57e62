// Booking an outer loop's iterations at once, once the L2 repeats its state, must count
// exactly what booking every step does. A trace makes every step an event and so turns the
// shortcut off: the traced run is the step-by-step reference.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <random>

namespace flashlab::sim::test {

namespace {

struct Counted {
  Report report;
  std::int64_t largest_jump = 0;  // the most outer iterations one progress call moved on by
};

Counted count_with_progress(Algorithm a, const Problem& p, bool traced) {
  Counted out;
  std::int64_t last = 0;
  const Progress progress = [&](std::int64_t done, std::int64_t total) {
    CHECK(done <= total);
    CHECK(done > last);
    out.largest_jump = std::max(out.largest_jump, done - last);
    last = done;
  };
  const TraceSink every_step = [](const Event&) {};
  out.report = count(a, p, traced ? every_step : TraceSink{}, progress);
  return out;
}

void check_same_books(const Report& fast, const Report& slow) {
  REQUIRE(fast.tensors.size() == slow.tensors.size());
  for (std::size_t t = 0; t < fast.tensors.size(); ++t) {
    CAPTURE(fast.tensors[t].name);
    CHECK(fast.tensors[t].read == slow.tensors[t].read);
    CHECK(fast.tensors[t].written == slow.tensors[t].written);
    CHECK(fast.tensors[t].dram_read == slow.tensors[t].dram_read);
    CHECK(fast.tensors[t].dram_written == slow.tensors[t].dram_written);
  }
  CHECK(fast.ops.matrix_flops == slow.ops.matrix_flops);
  CHECK(fast.ops.non_matrix() == slow.ops.non_matrix());
  CHECK(fast.tile_counts.computed == slow.tile_counts.computed);
  CHECK(fast.tile_counts.skipped == slow.tile_counts.skipped);
  CHECK(fast.steps == slow.steps);
}

}  // namespace

TEST_CASE("the L2's steady state books exactly what every step does") {
  auto rng = fresh_rng();
  std::uniform_int_distribution<Index> pick_N(200, 3000), pick_l2_kib(16, 2048);
  bool skipped_somewhere = false;
  for (int trial = 0; trial < 12; ++trial) {
    for (const Algorithm a : {Algorithm::fa1, Algorithm::fa2}) {
      const Index N = pick_N(rng), d = trial % 2 ? 59 : 64;
      Problem p = problem(N, d, trial % 3 ? DType::bf16 : DType::fp32, 48 * kKiB);
      p.l2_bytes = pick_l2_kib(rng) * kKiB;  // from far too small to holding everything
      if (trial % 4 == 3) p.tiles = cpu::TileSizes{13, 7};  // ragged last tiles
      CAPTURE(to_string(a));
      CAPTURE(N);
      CAPTURE(d);
      CAPTURE(p.l2_bytes);
      const Counted fast = count_with_progress(a, p, /*traced=*/false);
      const Counted slow = count_with_progress(a, p, /*traced=*/true);
      CHECK(slow.largest_jump == 1);  // the reference booked every iteration on its own
      skipped_somewhere = skipped_somewhere || fast.largest_jump > 1;
      check_same_books(fast.report, slow.report);
    }
  }
  CHECK(skipped_somewhere);  // the shortcut was taken, so the comparison tested it
}

TEST_CASE("with a causal mask the L2 books every step (no two iterations are alike)") {
  Problem p = problem(777, 32, DType::bf16, 48 * kKiB, cpu::Causal::top_left);
  p.l2_bytes = 256 * kKiB;
  for (const Algorithm a : {Algorithm::fa1, Algorithm::fa2}) {
    const Counted fast = count_with_progress(a, p, false);
    CHECK(fast.largest_jump == 1);
    check_same_books(fast.report, count_with_progress(a, p, true).report);
  }
}

TEST_CASE("the L2 at N = 1,048,576: counted in seconds, and K and V come from DRAM every sweep") {
  const auto& hw = find_profile("h200");
  Problem p = problem(Index{1} << 20, 64, DType::bf16, hw.sram_per_sm);
  p.l2_bytes = hw.l2_bytes;
  const Report r = count(Algorithm::fa2, p);
  // K and V (256 MiB together) are far larger than the L2: a sweep over them in LRU order
  // evicts every tile before it comes round again, so nothing is served from the L2.
  CHECK(r.tensor("K").dram_read == r.tensor("K").read);
  CHECK(r.tensor("V").dram_read == r.tensor("V").read);
  CHECK(r.tensor("Q").dram_read == p.N * p.d * 2);
}

TEST_CASE("estimate: the steps a trace would list and the numbers' memory, before running") {
  for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}) {
    for (const cpu::Causal causal : {cpu::Causal::none, cpu::Causal::top_left}) {
      Problem p = problem(301, 24, DType::fp32, 32 * kKiB, causal);
      p.l2_bytes = 64 * kKiB;  // the L2 changes no step
      std::int64_t events = 0;
      const Report traced = count(a, p, [&](const Event& e) { events += e.times; });
      const Estimate e = estimate(a, p);
      CAPTURE(to_string(a));
      CHECK(e.steps == events);
      CHECK(e.steps == traced.steps);
      CHECK(e.numerics_bytes >= 4 * p.N * p.d);  // at least O in fp32
    }
  }
  // naive's S and P are N x N fp32: the estimate must grow like N^2 and name it.
  const Problem big = problem(Index{1} << 22, 64, DType::bf16, 192 * kKiB);
  CHECK(estimate(Algorithm::naive, big).numerics_bytes >= 2 * 4 * big.N * big.N);
  CHECK(estimate(Algorithm::fa2, big).numerics_bytes < Bytes{1} << 32);
}

}  // namespace flashlab::sim::test

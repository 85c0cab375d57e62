// The ring's counts against closed forms computed here: link bytes, each rank's kernel and
// merge bytes per step, the pairs zigzag computes, the link figures, and the N per rank
// from which the link hides (checked at the threshold and one step below, and against the
// matrix term's closed form F / B, which bounds it from above).
#include "flashlab/sim/ring.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace flashlab;
using cpu::Index;
using sim::test::ceil_div;

namespace {
// One forward call on a square pair of c rows, non-causal, bf16 (2 bytes), the fa2 program's
// traffic: Q read once, K and V once per query tile (Tr = ceil(c / Br)), O written once in
// bf16 and L once in fp32.
sim::Bytes full_pair_bytes(Index c, Index d, Index Br) {
  return c * d * 2 * (1 + 2 * ceil_div(c, Br) + 1) + c * 4;
}
}  // namespace

TEST_CASE("link figures: NVLink H200 and NDR InfiniBand, one direction") {
  CHECK(sim::find_link("nvlink-h200").bytes_per_s == 450e9);  // 900 GB/s both ways
  CHECK(sim::find_link("ib-ndr").bytes_per_s == 50e9);        // 400 Gb/s = 50 GB/s
  CHECK_THROWS_WITH_AS(sim::find_link("pcie"), doctest::Contains("nvlink-h200, ib-ndr"),
                       cpu::InvalidArgument);
}

TEST_CASE("non-causal contiguous ring: every rank, every step, one full pair") {
  const auto& gpu = sim::find_profile("h200");
  const auto& link = sim::find_link("nvlink-h200");
  for (Index P : {1, 2, 3, 4, 8}) {
    for (Index n : {64, 97, 1000}) {
      const Index d = 64, heads = 3;
      sim::RingProblem p{.ranks = P,
                         .n_per_rank = n,
                         .d = d,
                         .heads = heads,
                         .layout = cpu::RingLayout::contiguous,
                         .tiles = {32, 16}};
      const auto r = sim::simulate_ring(p, gpu, link);
      CAPTURE(P);
      CAPTURE(n);
      const sim::Bytes slice = 2 * n * d * 2 * heads;  // K and V, bf16
      CHECK(r.link_bytes_per_step == slice);
      CHECK(r.link_bytes == (P - 1) * slice);
      CHECK(r.link_s == doctest::Approx(slice / 450e9));
      const sim::Bytes merge = 3 * n * (d + 1) * 4 * heads;
      for (Index rank = 0; rank < P; ++rank) {
        for (Index s = 0; s < P; ++s) {
          CHECK(r.at(rank, s).pairs_full == 1);
          CHECK(r.at(rank, s).kernel_bytes == full_pair_bytes(n, d, 32) * heads);
          CHECK(r.at(rank, s).merge_bytes == (s == 0 ? 0 : merge));
          CHECK(r.at(rank, s).ops.matrix_flops == 4 * n * n * d * heads);
        }
        CHECK(r.hbm_bytes(rank) == P * full_pair_bytes(n, d, 32) * heads + (P - 1) * merge);
      }
    }
  }
}

TEST_CASE("causal zigzag ring: two pairs' worth of work on every rank at every step") {
  const auto& gpu = sim::find_profile("h200");
  for (Index P : {2, 3, 4, 8}) {
    sim::RingProblem p{.ranks = P,
                       .n_per_rank = 256,
                       .d = 128,
                       .causal = cpu::Causal::top_left,
                       .layout = cpu::RingLayout::zigzag};
    const auto r = sim::simulate_ring(p, gpu, sim::find_link("nvlink-h200"));
    CAPTURE(P);
    for (Index rank = 0; rank < P; ++rank) {
      // Step 0: its two chunks against themselves (two diagonals) and the late one against
      // the early one; later steps: two full pairs, the other two wholly in the future.
      CHECK(r.at(rank, 0).pairs_diagonal == 2);
      CHECK(r.at(rank, 0).pairs_full == 1);
      for (Index s = 1; s < P; ++s) {
        CHECK(r.at(rank, s).pairs_full == 2);
        CHECK(r.at(rank, s).pairs_skipped == 2);
        CHECK(r.at(rank, s).kernel_bytes == 2 * full_pair_bytes(128, 128, 128));
      }
    }
  }
}

TEST_CASE("the link hides from the N per rank found, not one step below") {
  const auto& gpu = sim::find_profile("h200");
  for (const char* name : {"nvlink-h200", "ib-ndr"}) {
    const auto& link = sim::find_link(name);
    for (auto [causal, layout] : {std::pair{cpu::Causal::none, cpu::RingLayout::contiguous},
                                  std::pair{cpu::Causal::top_left, cpu::RingLayout::zigzag}}) {
      sim::RingProblem p{.ranks = 4, .d = 128, .causal = causal, .layout = layout};
      const auto n = sim::hiding_n_per_rank(p, gpu, link);
      CAPTURE(name);
      CAPTURE(to_string(layout));
      REQUIRE(n.has_value());
      const Index step = layout == cpu::RingLayout::zigzag ? 2 : 1;
      p.n_per_rank = *n;
      CHECK(sim::simulate_ring(p, gpu, link).link_hidden());
      p.n_per_rank = *n - step;
      CHECK_FALSE(sim::simulate_ring(p, gpu, link).link_hidden());
      // The matrix term alone hides the link from n = F / B (non-causal: 4 n^2 d flops
      // against 2 n d bf16 bytes), or 2 F / B with zigzag's half-work steps; the bound
      // is at least that term, so the threshold is at most that.
      const double matrix_n =
          (causal == cpu::Causal::none ? 1.0 : 2.0) * gpu.matrix_flops_per_s / link.bytes_per_s;
      CHECK(*n <= std::ceil(matrix_n) + step);
    }
  }
}

TEST_CASE("bad rings are refused with a message saying what would be right") {
  const auto& gpu = sim::find_profile("h200");
  const auto& link = sim::find_link("ib-ndr");
  const auto refuses = [&](sim::RingProblem p, const char* what) {
    CHECK_THROWS_WITH_AS(sim::simulate_ring(p, gpu, link), doctest::Contains(what),
                         cpu::InvalidArgument);
  };
  refuses({.ranks = 0}, "P must be at least 1");
  refuses({.ranks = 2, .n_per_rank = 0}, "between 1 and");
  refuses({.ranks = 2, .n_per_rank = 33}, "so it must be even");
  refuses({.ranks = 2, .causal = cpu::Causal::bottom_right}, "use top_left");
  refuses({.ranks = 2, .heads = 0}, "at least one");
}

// The ring backward's counts against closed forms computed here: each call's HBM bytes (the
// backward mirror's header formula, written out for a square non-causal pair), the
// accumulations, the bytes on each link per step and over the run (three times the
// forward's in bf16), the pairs zigzag computes, the tail, and the N per rank from which
// the link hides (checked there and one step below, and against the matrix term's bound).
#include "flashlab/sim/ring_backward.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace flashlab;
using cpu::Index;
using sim::test::ceil_div;

namespace {
constexpr Index kF = 4;  // fp32 bytes: D, L, the dQ accumulator, the ring's accumulators

sim::BackwardKernelFacts facts(Index Br, Index Bc) {
  return {.Br = Br, .Bc = Bc, .threads = 128, .sram_bytes = 0, .dtype = sim::DType::bf16};
}

// One backward call on a square non-causal pair of c rows, bf16 (b = 2), one head, atomic
// dQ: QR = ceil(c / Bc) c query rows loaded by the main kernel;
//   O c d b, dO (c + QR) d b, Q QR d b, K and V c d b each, dQ dK dV written c d b each,
//   D written c f and read QR f, L read QR f, the dQ accumulator written (c + QR) d f (zeros,
//   then the reductions, which bring nothing back) and read c d f (the post-kernel).
sim::Bytes full_pair_bytes(Index c, Index d, Index Bc) {
  const Index b = 2, QR = ceil_div(c, Bc) * c;
  return d * b * (7 * c + 2 * QR) + kF * (c + 2 * QR) + d * kF * (2 * c + QR);
}
}  // namespace

TEST_CASE("non-causal contiguous ring backward: one full pair per rank and step") {
  const auto& gpu = sim::find_profile("h200");
  const auto& link = sim::find_link("nvlink-h200");
  for (Index P : {1, 2, 3, 4, 8}) {
    for (Index n : {64, 97, 1000}) {
      const Index d = 64, heads = 3;
      const sim::RingProblem p{.ranks = P,
                               .n_per_rank = n,
                               .d = d,
                               .heads = heads,
                               .layout = cpu::RingLayout::contiguous};
      const auto r = sim::simulate_ring_backward(p, facts(32, 16), gpu, link);
      CAPTURE(P);
      CAPTURE(n);
      const sim::Bytes kv = 2 * n * d * 2 * heads, gradients = 2 * n * d * kF * heads;
      CHECK(r.kv_bytes_per_send == kv);
      CHECK(r.gradient_bytes_per_send == gradients);
      CHECK(r.link_bytes == (P - 1) * (kv + gradients));
      // Three times the forward's link bytes: bf16 K, V against fp32 dK, dV beside them.
      CHECK(r.link_bytes == 3 * sim::simulate_ring(p, gpu, link).link_bytes);
      for (Index s = 0; s < P; ++s) {
        CAPTURE(s);
        const sim::Bytes expected = (s + 1 < P ? kv : 0) + (s >= 2 ? gradients : 0);
        CHECK(r.link_bytes_in_step[size_t(s)] == expected);
        CHECK(r.link_s[size_t(s)] == doctest::Approx(expected / 450e9));
      }
      // The tail: the last accumulator's hop (and its owner's add), only when it travels.
      if (P == 1)
        CHECK(r.tail_s == 0);
      else
        CHECK(r.tail_s > gradients / 450e9);
      const sim::Bytes accumulate = 3 * n * d * (2 + 2 * kF) * heads;
      for (Index rank = 0; rank < P; ++rank) {
        for (Index s = 0; s < P; ++s) {
          CHECK(r.at(rank, s).pairs_full == 1);
          CHECK(r.at(rank, s).kernel_bytes == full_pair_bytes(n, d, 16) * heads);
          CHECK(r.at(rank, s).accumulate_bytes == accumulate);
          // Five products of 2 n^2 d FLOPs each: 2.5 times the forward's 4 n^2 d.
          CHECK(r.at(rank, s).ops.matrix_flops == 10 * n * n * d * heads);
        }
        CHECK(r.hbm_bytes(rank) == P * (full_pair_bytes(n, d, 16) * heads + accumulate));
      }
    }
  }
}

TEST_CASE("causal zigzag ring backward: the forward's pairs on every rank at every step") {
  const auto& gpu = sim::find_profile("h200");
  const auto& link = sim::find_link("nvlink-h200");
  for (Index P : {2, 3, 4, 8}) {
    const sim::RingProblem p{.ranks = P,
                             .n_per_rank = 256,
                             .d = 128,
                             .causal = cpu::Causal::top_left,
                             .layout = cpu::RingLayout::zigzag};
    const auto r = sim::simulate_ring_backward(p, facts(64, 64), gpu, link);
    const auto f = sim::simulate_ring(p, gpu, link);
    CAPTURE(P);
    for (Index rank = 0; rank < P; ++rank) {
      CHECK(r.at(rank, 0).pairs_diagonal == 2);
      CHECK(r.at(rank, 0).pairs_full == 1);
      for (Index s = 0; s < P; ++s) {
        CHECK(r.at(rank, s).pairs_full == f.at(rank, s).pairs_full);
        CHECK(r.at(rank, s).pairs_diagonal == f.at(rank, s).pairs_diagonal);
        CHECK(r.at(rank, s).pairs_skipped == f.at(rank, s).pairs_skipped);
      }
      for (Index s = 1; s < P; ++s)
        CHECK(r.at(rank, s).kernel_bytes == 2 * full_pair_bytes(128, 128, 64));
    }
  }
}

TEST_CASE("the backward's link hides from the N per rank found, not one step below") {
  const auto& gpu = sim::find_profile("h200");
  for (const char* name : {"nvlink-h200", "ib-ndr"}) {
    const auto& link = sim::find_link(name);
    for (auto [causal, layout] : {std::pair{cpu::Causal::none, cpu::RingLayout::contiguous},
                                  std::pair{cpu::Causal::top_left, cpu::RingLayout::zigzag}}) {
      sim::RingProblem p{.ranks = 4, .d = 128, .causal = causal, .layout = layout};
      const auto f = facts(64, 128);
      const auto n = sim::hiding_n_per_rank_backward(p, f, gpu, link);
      CAPTURE(name);
      CAPTURE(to_string(layout));
      REQUIRE(n.has_value());
      const Index step = layout == cpu::RingLayout::zigzag ? 2 : 1;
      p.n_per_rank = *n;
      CHECK(sim::simulate_ring_backward(p, f, gpu, link).link_hidden());
      p.n_per_rank = *n - step;
      CHECK_FALSE(sim::simulate_ring_backward(p, f, gpu, link).link_hidden());
      // The matrix term alone: 10 n^2 d FLOPs per step (half when causal zigzag) against at
      // most 2 n d (2 + 4) bytes on the link: hidden from n = 1.2 F / B (2.4 F / B).
      const double matrix_n =
          (causal == cpu::Causal::none ? 1.2 : 2.4) * gpu.matrix_flops_per_s / link.bytes_per_s;
      CHECK(*n <= std::ceil(matrix_n) + step);
    }
  }
}

TEST_CASE("bad ring backwards are refused with a message saying what would be right") {
  const auto& gpu = sim::find_profile("h200");
  const auto& link = sim::find_link("ib-ndr");
  const auto refuses = [&](sim::RingProblem p, sim::BackwardKernelFacts f, const char* what) {
    CHECK_THROWS_WITH_AS(sim::simulate_ring_backward(p, f, gpu, link), doctest::Contains(what),
                         cpu::InvalidArgument);
  };
  refuses({.ranks = 0}, facts(64, 64), "P must be at least 1");
  refuses({.ranks = 2, .n_per_rank = 33}, facts(64, 64), "so it must be even");
  refuses({.ranks = 2, .causal = cpu::Causal::bottom_right}, facts(64, 64), "use top_left");
  auto fp16 = facts(64, 64);
  fp16.dtype = sim::DType::fp16;
  refuses({.ranks = 2}, fp16, "describe the kernel for the dtype the ring runs in");
  refuses({.ranks = 2}, facts(0, 64), "Br");
}

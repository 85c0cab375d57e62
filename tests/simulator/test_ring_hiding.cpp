// The N per rank from which a ring's sends hide (sim::hiding_n_per_rank and its backward
// twin): hidden(n) is not monotone in n, because a step's HBM bytes jump where its query
// tile count does. Here: the case `flashlab ring` shows (causal zigzag on IB, P = 2), the
// diagonal pair's bytes against their closed form on both sides of a jump, the search on a
// hand-made predicate, the matrix bound the search starts from, and the answer hidden at
// every n of the next few thousand for several rings, both links, both passes.
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/ring.hpp"
#include "flashlab/sim/ring_backward.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

using namespace flashlab;
using cpu::Index;
using sim::test::ceil_div;

namespace {
constexpr Index kD = 128;

// `flashlab ring`'s default ring with --causal: P = 2, d = 128, one head, bf16, zigzag, fa2's
// tiles at d = 128.
sim::RingProblem cli_causal_ring() {
  const auto fa2 = gpu::fa2::config(kD, FLASHLAB_BF16);
  return {.ranks = 2,
          .d = kD,
          .causal = cpu::Causal::top_left,
          .layout = cpu::RingLayout::zigzag,
          .tiles = {fa2.Br, fa2.Bc}};
}

bool forward_hidden(sim::RingProblem p, Index n, const char* link) {
  p.n_per_rank = n;
  return sim::simulate_ring(p, sim::find_profile("h200"), sim::find_link(link)).link_hidden();
}

// A causal pair of c rows on the diagonal, one head, bf16 (b = 2), Bc dividing Br: query
// tile i reads Q_i once and the keys up to its own last row, (i + 1) Br of them, the last
// tile all c; O (b) and L (fp32) written once:
//   2 c d b + 2 d b (Br Tr (Tr - 1) / 2 + c) + 4 c,   Tr = ceil(c / Br).
sim::Bytes diagonal_pair_bytes(Index c, Index d, Index Br) {
  const Index b = 2, Tr = ceil_div(c, Br);
  return 2 * c * d * b + 2 * d * b * (Br * Tr * (Tr - 1) / 2 + c) + 4 * c;
}

// A full pair: Q, O and L once, K and V once per query tile.
sim::Bytes full_pair_bytes(Index c, Index d, Index Br) {
  return c * d * 2 * (2 + 2 * ceil_div(c, Br)) + c * 4;
}

sim::BackwardKernelFacts backward_facts() {
  return {.Br = 64, .Bc = 128, .threads = 128, .sram_bytes = 0, .dtype = sim::DType::bf16};
}
}  // namespace

TEST_CASE("flashlab ring's causal zigzag on IB hides, stops hiding, and hides again") {
  const sim::RingProblem p = cli_causal_ring();
  REQUIRE(p.tiles.Br == 128);  // the band edges below are multiples of 2 Br = 256
  // c = n / 2 rows a chunk: 80 Br + 1 just past a jump, 81 Br at the band's end, then the next.
  for (Index n = 20482; n <= 20490; n += 2) CHECK(forward_hidden(p, n, "ib-ndr"));
  for (Index n : {20492, 20600, 20734, 20736}) CHECK_FALSE(forward_hidden(p, n, "ib-ndr"));
  for (Index n = 20738; n <= 20738 + 4096; n += 2) {
    CAPTURE(n);
    REQUIRE(forward_hidden(p, n, "ib-ndr"));
  }
  const auto from = sim::hiding_n_per_rank(p, sim::find_profile("h200"), sim::find_link("ib-ndr"));
  REQUIRE(from.has_value());
  CHECK(*from == 20738);
}

TEST_CASE("the term that jumps: a diagonal pair's K, V bytes, fixed within a band, plus c") {
  const auto& gpu = sim::find_profile("h200");
  sim::RingProblem p = cli_causal_ring();
  const Index Br = p.tiles.Br;
  for (Index c : {Index{2}, Index{17}, Br - 1, Br, Br + 1, 80 * Br + 1, 81 * Br, 81 * Br + 1}) {
    CAPTURE(c);
    p.n_per_rank = 2 * c;
    const auto r = sim::simulate_ring(p, gpu, sim::find_link("ib-ndr"));
    // Step 0: the early chunk against itself and the late one against both.
    REQUIRE(r.at(0, 0).pairs_diagonal == 2);
    REQUIRE(r.at(0, 0).pairs_full == 1);
    CHECK(r.at(0, 0).kernel_bytes ==
          2 * diagonal_pair_bytes(c, kD, Br) + full_pair_bytes(c, kD, Br));
  }
  // At a band's edge one more row brings a query tile that reads every key again: the
  // step's bytes jump by more than 3 x 2 c d b (a pass of K and V in each of its three
  // pairs), where one more row inside the band adds a hundredth of that; the slice sent
  // grows by the same 2 x 2 d b either way.
  const auto step0 = [&](Index rows) {
    return 2 * diagonal_pair_bytes(rows, kD, Br) + full_pair_bytes(rows, kD, Br);
  };
  const Index c = 81 * Br;
  const sim::Bytes jump = step0(c + 1) - step0(c), inside = step0(c) - step0(c - 1);
  CHECK(jump > 3 * 2 * c * kD * 2);
  CHECK(inside * 100 < jump);
}

TEST_CASE("smallest_hiding_n walks down from where hiding is sure, past a gap") {
  sim::RingProblem p{.ranks = 4, .layout = cpu::RingLayout::contiguous};
  int calls = 0;
  const auto gap = [&](Index n) {  // hidden at 10..14, not at 15..20, hidden from 21 on
    ++calls;
    return n >= 10 && !(n >= 15 && n <= 20);
  };
  CHECK(sim::smallest_hiding_n(p, gap, 100.0) == 21);
  CHECK(calls == 100 - 21 + 2);  // 100 down to 20, the first that does not hide
  CHECK(sim::smallest_hiding_n(p, gap, 20.5) == 21);  // sure_from rounded up to a step
  CHECK(sim::smallest_hiding_n(
            p, [](Index) { return true; }, 7.0) == 1);
  CHECK_FALSE(sim::smallest_hiding_n(
                  p, [](Index) { return false; }, 1e30)
                  .has_value());
  p.layout = cpu::RingLayout::zigzag;
  CHECK(sim::smallest_hiding_n(p, gap, 100.0) == 22);  // even n only
  p.ranks = 1;                                         // nothing is sent
  CHECK(sim::smallest_hiding_n(
            p, [](Index) { return false; }, 100.0) == 2);
}

TEST_CASE("the bounds the search starts from hold on every sending step") {
  // hiding_n_per_rank starts from the n where one term alone outlasts the send, 2 n d b bytes
  // a head: the busiest rank's matrix FLOPs, at least 4 S d a head, or its kernels' HBM bytes,
  // at least 2 d b S / Br (S = n^2 scores, causal n^2 / 2). The backward's: at least 10 S d
  // FLOPs against at most 2 n d (b + 4) bytes sent.
  const auto& gpu = sim::find_profile("h200");
  const auto& link = sim::find_link("ib-ndr");
  const auto f = backward_facts();
  const Index heads = 3, b = 2;
  for (Index P : {2, 3, 4, 8}) {
    for (auto layout : {cpu::RingLayout::contiguous, cpu::RingLayout::zigzag}) {
      for (auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
        for (Index n : {2, 18, 98, 114, 256, 1024, 4098}) {
          sim::RingProblem p{.ranks = P,
                             .n_per_rank = n,
                             .d = kD,
                             .heads = heads,
                             .causal = causal,
                             .layout = layout,
                             .tiles = cli_causal_ring().tiles};
          CAPTURE(P);
          CAPTURE(to_string(layout));
          CAPTURE(to_string(causal));
          CAPTURE(n);
          // Twice the scores S a head: n^2 d non-causal, n^2 d / 2 causal.
          const Index twice_scores = (causal == cpu::Causal::none ? 2 : 1) * n * n;
          const Index nd = n * kD * heads;
          const auto fwd = sim::simulate_ring(p, gpu, link);
          CHECK(fwd.link_bytes_per_step == 2 * nd * b);
          const auto bwd = sim::simulate_ring_backward(p, f, gpu, link);
          for (Index s = 0; s < P; ++s) {
            Index fwd_flops = 0, fwd_bytes = 0, bwd_flops = 0;
            for (Index r = 0; r < P; ++r) {
              fwd_flops = std::max(fwd_flops, fwd.at(r, s).ops.matrix_flops);
              fwd_bytes = std::max(fwd_bytes, fwd.at(r, s).kernel_bytes);
              bwd_flops = std::max(bwd_flops, bwd.at(r, s).ops.matrix_flops);
            }
            CAPTURE(s);
            if (s + 1 < P) {
              CHECK(2 * fwd_flops >= 4 * twice_scores * kD * heads);
              CHECK(2 * fwd_bytes * p.tiles.Br >= 2 * kD * b * twice_scores * heads);
            }
            if (bwd.link_bytes_in_step[static_cast<size_t>(s)] > 0) {
              CHECK(bwd.link_bytes_in_step[static_cast<size_t>(s)] <= 2 * nd * (b + 4));
              CHECK(2 * bwd_flops >= 10 * twice_scores * kD * heads);
            }
          }
        }
      }
    }
  }
  // The n those give: F / B for the forward's matrix term, non-causal, as ring.hpp's header
  // says, and Br BW / B for its memory term.
  CHECK(sim::term_hiding_n(4, 4, gpu.matrix_flops_per_s, link) ==
        doctest::Approx(gpu.matrix_flops_per_s / link.bytes_per_s));
  CHECK(sim::term_hiding_n(4, 4.0 / 128, gpu.hbm_bytes_per_s, link) ==
        doctest::Approx(128 * gpu.hbm_bytes_per_s / link.bytes_per_s));
}

TEST_CASE("the N per rank found hides at every larger N of the next few thousand") {
  const auto& gpu = sim::find_profile("h200");
  const auto f = backward_facts();
  constexpr Index kAfter = 2048;  // 16 bands of Br = 128 rows a chunk (8 in zigzag)
  for (const char* name : {"nvlink-h200", "ib-ndr"}) {
    const auto& link = sim::find_link(name);
    for (Index P : {2, 3, 8}) {
      for (auto layout : {cpu::RingLayout::contiguous, cpu::RingLayout::zigzag}) {
        for (auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
          sim::RingProblem p{.ranks = P,
                             .d = kD,
                             .causal = causal,
                             .layout = layout,
                             .tiles = cli_causal_ring().tiles};
          const Index step = layout == cpu::RingLayout::zigzag ? 2 : 1;
          CAPTURE(name);
          CAPTURE(P);
          CAPTURE(to_string(layout));
          CAPTURE(to_string(causal));
          const auto fwd = sim::hiding_n_per_rank(p, gpu, link);
          const auto bwd = sim::hiding_n_per_rank_backward(p, f, gpu, link);
          REQUIRE(fwd.has_value());
          REQUIRE(bwd.has_value());
          const auto hidden_forward = [&](Index n) {
            p.n_per_rank = n;
            return sim::simulate_ring(p, gpu, link).link_hidden();
          };
          const auto hidden_backward = [&](Index n) {
            p.n_per_rank = n;
            return sim::simulate_ring_backward(p, f, gpu, link).link_hidden();
          };
          if (*fwd > step) CHECK_FALSE(hidden_forward(*fwd - step));
          if (*bwd > step) CHECK_FALSE(hidden_backward(*bwd - step));
          Index fwd_misses = 0, bwd_misses = 0;
          for (Index n = *fwd; n <= *fwd + kAfter; n += step) fwd_misses += !hidden_forward(n);
          for (Index n = *bwd; n <= *bwd + kAfter; n += step) bwd_misses += !hidden_backward(n);
          CHECK(fwd_misses == 0);
          CHECK(bwd_misses == 0);
        }
      }
    }
  }
}

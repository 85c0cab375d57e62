// Ring attention across P GPUs, counted: each rank's HBM bytes and work per step (the fa2
// program run on each pair of chunks it computes, cpu::ring_schedule.hpp's layout), the
// bytes each link carries, and whether sending the next K/V slice hides behind the current
// step's compute.
//
// Per link, over the whole run (the K and V slices cross P - 1 links, one per step but
// the last):   link bytes = (P - 1) * 2 * n * d * bytes(dtype) * heads,   n = N per rank.
// Per step, compute grows as n^2 d and the slice sent as n d, so the link hides from some
// n on: non-causal, t_compute >= 4 n^2 d / F and t_link = 4 n d / B (bf16) give n >= F / B;
// causal, each step's busiest rank does at least half that work, so n >= 2 F / B.
// Below that n the step's bound is often its HBM bytes, and those are quantised by the
// tiles: whether the link hides need not be monotone in n (ring.cpp says which term jumps).
#pragma once

#include "flashlab/cpu/ring_schedule.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"

#include <functional>
#include <optional>
#include <vector>

namespace flashlab::sim {

struct RingProblem {
  cpu::Index ranks = 2;          // P
  cpu::Index n_per_rank = 4096;  // n: queries (and keys) each rank holds; N = P n
  cpu::Index d = 128;
  cpu::Index heads = 1;  // batch x heads: every rank holds its slice of each
  DType dtype = DType::bf16;
  cpu::Causal causal = cpu::Causal::none;  // none or top_left (N_q = N_k: both alignments agree)
  cpu::RingLayout layout = cpu::RingLayout::zigzag;
  cpu::TileSizes tiles{128, 64};  // Br, Bc of the forward kernel run on each pair of chunks
};

// One rank during one step: the pairs of chunks it computes (each a forward kernel call).
struct RingRankStep {
  cpu::Index pairs_full = 0, pairs_diagonal = 0, pairs_skipped = 0;
  Bytes kernel_bytes = 0;  // HBM bytes of its forward calls (the fa2 program's count)
  // The merge of each call's (O, L) into the running one: reads both, writes one, in fp32
  // (3 (rows d + rows) 4 bytes per call after the first that touches those rows).
  Bytes merge_bytes = 0;
  OpCounts ops{};
  double compute_s = 0;  // the roofline bound of that work on one GPU
};

struct RingReport {
  RingProblem problem{};
  std::vector<RingRankStep> steps{};  // (ranks * ranks) row-major: [rank * ranks + step]
  Bytes link_bytes_per_step = 0;      // the K and V slice one rank sends: 2 n d bytes heads
  Bytes link_bytes = 0;               // per link over the run: (P - 1) link_bytes_per_step
  double link_s = 0;                  // one slice over one link
  std::vector<double> step_s{};       // per step: max(slowest rank's compute, link if sent)
  std::vector<double> compute_s{};    // per step: the slowest rank's compute

  const RingRankStep& at(cpu::Index rank, cpu::Index step) const;
  Bytes hbm_bytes(cpu::Index rank) const;  // kernel + merge bytes over the run
  double seconds() const;                  // sum of step_s
  // Every step that sends a slice computes at least as long as the send takes.
  bool link_hidden() const;
};

// Throws cpu::InvalidArgument for P < 1, n outside [1, 2^22], an odd n in the zigzag layout,
// bottom_right causal or heads < 1, saying what would be right: the checks of every ring.
void check_ring(const RingProblem& problem);

// Throws cpu::InvalidArgument for P < 1, n < 1, an odd n in the zigzag layout (its two
// chunks per rank must be equal), bottom_right causal (use top_left: with N_q = N_k they
// are one mask), heads < 1, or a pair the fa2 program refuses (sim::check).
RingReport simulate_ring(const RingProblem& problem, const HardwareProfile& gpu,
                         const LinkProfile& link);

// The smallest N per rank (a multiple of 2 for zigzag) from which hidden(n) holds for EVERY
// larger n up to 2^22. hidden() need not be monotone (tile quantisation makes the link hide,
// stop hiding and hide again as n grows), so no bisection: `sure_from` is an n from which
// the caller has shown that hidden(n) holds for every larger n (one term of the step's
// bound alone outlasts the send there, term_hiding_n), and the search walks down from
// there, one step at a time, to the last n that does not hide. none if hidden(2^22) is
// false. P = 1 sends nothing: the smallest n.
std::optional<cpu::Index> smallest_hiding_n(const RingProblem& problem,
                                            const std::function<bool(cpu::Index)>& hidden,
                                            double sure_from);

// The n from which one term of a step's roofline bound alone hides a send: a step whose
// busiest rank does at least work_per_n2d n^2 d units of work a head (matrix FLOPs, or HBM
// bytes) at work_per_s lasts at least that long, and a send of at most sent_per_nd n d bytes
// a head lasts that over the link's B, so from
//   n = sent_per_nd work_per_s / (work_per_n2d B)
// on every step's compute outlasts its send, whatever its other terms.
double term_hiding_n(double sent_per_nd, double work_per_n2d, double work_per_s,
                     const LinkProfile& link);

// The smallest N per rank (a multiple of 2 for zigzag) from which the link hides at every
// step, for every larger N up to 2^22; none if it does not hide at 2^22. Not monotone below
// it: see ring.cpp for the term that jumps.
std::optional<cpu::Index> hiding_n_per_rank(RingProblem problem, const HardwareProfile& gpu,
                                            const LinkProfile& link);

}  // namespace flashlab::sim

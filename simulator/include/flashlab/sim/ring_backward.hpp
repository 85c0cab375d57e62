// Ring attention's backward across P GPUs, counted: each rank's HBM bytes and work per step
// (the GPU backward's mirror, backward_kernel.hpp, run on each pair of chunks it computes),
// the bytes each link carries, and whether each step's sends hide behind its compute. The
// schedule is cpu_reference's (ring_backward.hpp): K and V travel as in the forward, and the
// dK, dV accumulators (fp32) follow their slice round the ring and come home to its owner.
//
// With n rows per rank, b bytes per input element and f = 4 (the fp32 accumulators), per
// link and per head:
//   K, V sent while steps 0 .. P - 2 compute:           2 n d b each step
//   dK, dV closed after step s sent while s + 1 computes
//   (s = 1 .. P - 2), and after the last step (s = P - 1): 2 n d f each
//   over the run:  link bytes = (P - 1) 2 n d (b + f)  = 3 x the forward's (P - 1) 2 n d b
//                                                        for bf16 (b = 2)
// The accumulator closed after the last step has no compute left to hide behind: its hop
// home and its owner's last add (read both shares, write one, fp32) are the tail.
// Per call, a rank adds the kernel's dQ, dK, dV shares (input dtype) into fp32 accumulators:
// read the share, read and write the accumulator, (rows_q + 2 rows_k) d (b + 2f) bytes.
// A step's matrix FLOPs are 2.5 times the forward's and its sends 3 times, but its HBM bytes
// (the mirror books dQ's fp32 atomics at the L2, charged at HBM bandwidth by the roofline)
// grow more still: in this bound the backward hides from about the forward's n, or sooner.
#pragma once

#include "flashlab/sim/backward_kernel.hpp"
#include "flashlab/sim/ring.hpp"

#include <optional>
#include <vector>

namespace flashlab::sim {

// One rank during one step of the backward: the pairs of chunks it computes (each a call of
// the GPU backward, given the rank's O, dO and its merged L).
struct RingBackwardRankStep {
  cpu::Index pairs_full = 0, pairs_diagonal = 0, pairs_skipped = 0;
  Bytes kernel_bytes = 0;      // HBM bytes of its backward calls (the mirror's count)
  Bytes accumulate_bytes = 0;  // the calls' dQ, dK, dV shares added into fp32 accumulators
  OpCounts ops{};
  double compute_s = 0;  // the roofline bound of that work on one GPU
};

struct RingBackwardReport {
  RingProblem problem{};
  BackwardKernelFacts facts{};
  std::vector<RingBackwardRankStep> steps{};  // (ranks * ranks) row-major: [rank * ranks + step]
  Bytes kv_bytes_per_send = 0;                // one K/V slice: 2 n d b heads
  Bytes gradient_bytes_per_send = 0;          // one dK/dV accumulator: 2 n d f heads
  std::vector<Bytes> link_bytes_in_step{};    // per step: what each link carries meanwhile
  Bytes link_bytes = 0;             // per link over the run, tail included: (P - 1)(kv + gradient)
  std::vector<double> link_s{};     // per step: link_bytes_in_step over the link
  std::vector<double> compute_s{};  // per step: the slowest rank's compute
  std::vector<double> step_s{};     // per step: max(compute, link)
  double tail_s = 0;                // after the last step: the last accumulators' hop and final add

  const RingBackwardRankStep& at(cpu::Index rank, cpu::Index step) const;
  Bytes hbm_bytes(cpu::Index rank) const;  // kernel + accumulate bytes over the run
  double seconds() const;                  // sum of step_s, and the tail
  // Every step's compute lasts at least as long as what the link carries meanwhile (the
  // tail, which has nothing to hide behind, is apart).
  bool link_hidden() const;
};

// Throws cpu::InvalidArgument as check_ring() does, when facts.dtype is not problem.dtype,
// or for a pair the backward mirror refuses (sim::check of backward_kernel.hpp).
RingBackwardReport simulate_ring_backward(const RingProblem& problem,
                                          const BackwardKernelFacts& facts,
                                          const HardwareProfile& gpu, const LinkProfile& link);

// The smallest N per rank (a multiple of 2 for zigzag) from which the backward's link hides
// at every step, for every larger N up to 2^22 (smallest_hiding_n); none if it does not
// hide at 2^22.
std::optional<cpu::Index> hiding_n_per_rank_backward(RingProblem problem,
                                                     const BackwardKernelFacts& facts,
                                                     const HardwareProfile& gpu,
                                                     const LinkProfile& link);

}  // namespace flashlab::sim

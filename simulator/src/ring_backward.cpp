#include "flashlab/sim/ring_backward.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/ring_backward.hpp"

#include <algorithm>
#include <numeric>

namespace flashlab::sim {

namespace {
constexpr Bytes kFp32 = bytes_of(kAccumulator);

// The backward mirror's count for one square pair of chunks of `rows` rows, every head.
PassReport pair_report(const RingProblem& p, const BackwardKernelFacts& facts, cpu::Index rows,
                       cpu::Causal causal) {
  const BackwardShape pair{.batch = 1,
                           .heads_q = p.heads,
                           .heads_kv = p.heads,
                           .n_q = rows,
                           .n_k = rows,
                           .d = p.d,
                           .causal = causal};
  return count_backward_kernel(pair, facts);
}

void check_facts(const RingProblem& p, const BackwardKernelFacts& facts) {
  if (facts.dtype == p.dtype) return;
  throw cpu::InvalidArgument("the backward kernel's dtype is " +
                             std::string(to_string(facts.dtype)) + " but the ring's is " +
                             std::string(to_string(p.dtype)) +
                             ": describe the kernel for the dtype the ring runs in");
}
}  // namespace

const RingBackwardRankStep& RingBackwardReport::at(cpu::Index rank, cpu::Index step) const {
  return steps.at(static_cast<size_t>(rank * problem.ranks + step));
}

Bytes RingBackwardReport::hbm_bytes(cpu::Index rank) const {
  Bytes sum = 0;
  for (cpu::Index s = 0; s < problem.ranks; ++s)
    sum += at(rank, s).kernel_bytes + at(rank, s).accumulate_bytes;
  return sum;
}

double RingBackwardReport::seconds() const {
  return std::accumulate(step_s.begin(), step_s.end(), 0.0) + tail_s;
}

bool RingBackwardReport::link_hidden() const {
  for (size_t s = 0; s < step_s.size(); ++s)
    if (compute_s[s] < link_s[s]) return false;
  return true;
}

RingBackwardReport simulate_ring_backward(const RingProblem& p, const BackwardKernelFacts& facts,
                                          const HardwareProfile& gpu, const LinkProfile& link) {
  check_ring(p);
  check_facts(p, facts);
  const cpu::Index P = p.ranks, n = p.n_per_rank, b = bytes_of(p.dtype);
  const cpu::Index N = cpu::checked_mul(P, n, "the sequence length P n");
  const cpu::Index chunk = p.layout == cpu::RingLayout::zigzag ? n / 2 : n;
  const PassReport full = pair_report(p, facts, chunk, cpu::Causal::none);
  const PassReport diagonal = pair_report(p, facts, chunk, cpu::Causal::top_left);
  // A call's shares (dQ of its query chunk, dK and dV of its key chunk) into fp32.
  const cpu::Index share_elements = 3 * chunk * p.d * p.heads;
  const Bytes accumulate_per_call = share_elements * (b + 2 * kFp32);

  RingBackwardReport out{.problem = p, .facts = facts};
  out.kv_bytes_per_send = 2 * n * p.d * b * p.heads;
  out.gradient_bytes_per_send = 2 * n * p.d * kFp32 * p.heads;
  const cpu::Mask mask{p.causal, N, N};
  for (cpu::Index r = 0; r < P; ++r) {
    const auto q = cpu::rank_slice(r, P, N, p.layout);
    for (cpu::Index s = 0; s < P; ++s) {
      RingBackwardRankStep step;
      for (const cpu::Chunk& qc : q) {
        for (const cpu::Chunk& k : cpu::rank_slice(cpu::kv_source(r, s, P), P, N, p.layout)) {
          const cpu::TileKind kind = mask.classify(qc.begin, qc.rows, k.begin, k.rows);
          if (kind == cpu::TileKind::skipped) {
            ++step.pairs_skipped;
            continue;
          }
          const PassReport& pair = kind == cpu::TileKind::full ? full : diagonal;
          ++(kind == cpu::TileKind::full ? step.pairs_full : step.pairs_diagonal);
          step.kernel_bytes += pair.bytes_total();
          step.ops += pair.ops;
          step.accumulate_bytes += accumulate_per_call;
          step.ops.sum += share_elements;
        }
      }
      step.compute_s = roofline(step.ops, step.kernel_bytes + step.accumulate_bytes, gpu).seconds();
      out.steps.push_back(step);
    }
  }
  for (cpu::Index s = 0; s < P; ++s) {
    double slowest = 0;
    for (cpu::Index r = 0; r < P; ++r) slowest = std::max(slowest, out.at(r, s).compute_s);
    // While step s computes: the K/V slice of step s + 1, and the accumulator closed after
    // step s - 1 (the one closed after the last step goes in the tail).
    Bytes sent = 0;
    if (cpu::sends_kv(s, P)) sent += out.kv_bytes_per_send;
    if (s >= 1 && cpu::sends_gradients(s - 1, P)) sent += out.gradient_bytes_per_send;
    out.compute_s.push_back(slowest);
    out.link_bytes_in_step.push_back(sent);
    out.link_s.push_back(static_cast<double>(sent) / link.bytes_per_s);
    out.step_s.push_back(std::max(slowest, out.link_s.back()));
    out.link_bytes += sent;
  }
  if (cpu::sends_gradients(P - 1, P)) {  // the last hop home, then the owner's add
    out.link_bytes += out.gradient_bytes_per_send;
    const cpu::Index elements = 2 * n * p.d * p.heads;  // dK and dV of one slice
    OpCounts add{};
    add.sum = elements;
    out.tail_s = static_cast<double>(out.gradient_bytes_per_send) / link.bytes_per_s +
                 roofline(add, 3 * elements * kFp32, gpu).seconds();
  }
  return out;
}

std::optional<cpu::Index> hiding_n_per_rank_backward(RingProblem p,
                                                     const BackwardKernelFacts& facts,
                                                     const HardwareProfile& gpu,
                                                     const LinkProfile& link) {
  // A step sends at most a K/V slice and an accumulator, 2 n d (b + f) bytes a head; its
  // busiest rank computes every score of an n x n block, or, causal, at least half of them
  // (ring.cpp's argument), and the mirror counts at least five products of 2 d FLOPs per
  // score it computes (S, dP, dV, dK, dQ): 10 n^2 d, or 5 n^2 d. (The backward's count is
  // a closed form, so the walk down from this matrix term's n is quick.)
  const double sent = 2.0 * double(bytes_of(p.dtype) + kFp32);
  const double flops = p.causal == cpu::Causal::none ? 10.0 : 5.0;
  return smallest_hiding_n(
      p,
      [&](cpu::Index n) {
        p.n_per_rank = n;
        return simulate_ring_backward(p, facts, gpu, link).link_hidden();
      },
      term_hiding_n(sent, flops, gpu.matrix_flops_per_s, link));
}

}  // namespace flashlab::sim

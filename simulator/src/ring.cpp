#include "flashlab/sim/ring.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/sim/limits.hpp"
#include "flashlab/sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>

namespace flashlab::sim {

namespace {

// The fa2 program's count for one square pair of chunks of `rows` rows.
Report pair_report(const RingProblem& p, cpu::Index rows, cpu::Causal causal,
                   const HardwareProfile& gpu) {
  Problem pair{.N = rows,
               .d = p.d,
               .dtype = p.dtype,
               .causal = causal,
               .sram_bytes = gpu.sram_per_sm,
               .tiles = p.tiles};
  return count(Algorithm::fa2, pair);
}
}  // namespace

void check_ring(const RingProblem& p) {
  std::ostringstream why;
  if (p.ranks < 1)
    why << "ring of P = " << p.ranks << " ranks: P must be at least 1";
  else if (p.n_per_rank < 1 || p.n_per_rank > kMaxLength)
    why << "N per rank = " << p.n_per_rank << ": it must be between 1 and " << kMaxLength;
  else if (p.layout == cpu::RingLayout::zigzag && p.n_per_rank % 2 != 0)
    why << "N per rank = " << p.n_per_rank
        << " in the zigzag layout: each rank holds two equal chunks, so it must be even";
  else if (p.causal == cpu::Causal::bottom_right)
    why << "causal bottom_right in a ring of equal slices: N_q = N_k, so use top_left (the "
           "same mask)";
  else if (p.heads < 1)
    why << "heads = " << p.heads << ": at least one (batch x heads)";
  else
    return;
  throw cpu::InvalidArgument(why.str());
}

const RingRankStep& RingReport::at(cpu::Index rank, cpu::Index step) const {
  return steps.at(static_cast<size_t>(rank * problem.ranks + step));
}

Bytes RingReport::hbm_bytes(cpu::Index rank) const {
  Bytes sum = 0;
  for (cpu::Index s = 0; s < problem.ranks; ++s)
    sum += at(rank, s).kernel_bytes + at(rank, s).merge_bytes;
  return sum;
}

double RingReport::seconds() const { return std::accumulate(step_s.begin(), step_s.end(), 0.0); }

bool RingReport::link_hidden() const {
  for (cpu::Index s = 0; s + 1 < problem.ranks; ++s)  // the last step sends nothing
    if (compute_s[static_cast<size_t>(s)] < link_s) return false;
  return true;
}

RingReport simulate_ring(const RingProblem& p, const HardwareProfile& gpu,
                         const LinkProfile& link) {
  check_ring(p);
  cpu::check_causal(p.causal);
  const cpu::Index P = p.ranks, n = p.n_per_rank;
  const cpu::Index N = cpu::checked_mul(P, n, "the sequence length P n");
  const cpu::Index chunk = p.layout == cpu::RingLayout::zigzag ? n / 2 : n;
  const Report full = pair_report(p, chunk, cpu::Causal::none, gpu);
  const Report diagonal = pair_report(p, chunk, cpu::Causal::top_left, gpu);
  const Bytes merge_per_call = 3 * chunk * (p.d + 1) * bytes_of(DType::fp32) * p.heads;

  RingReport out{.problem = p};
  out.link_bytes_per_step = 2 * n * p.d * bytes_of(p.dtype) * p.heads;
  out.link_bytes = (P - 1) * out.link_bytes_per_step;
  out.link_s = static_cast<double>(out.link_bytes_per_step) / link.bytes_per_s;
  const cpu::Mask mask{p.causal, N, N};
  for (cpu::Index r = 0; r < P; ++r) {
    const auto q = cpu::rank_slice(r, P, N, p.layout);
    std::vector<bool> touched(q.size(), false);  // has a Q chunk an (O, L) to merge into?
    for (cpu::Index s = 0; s < P; ++s) {
      RingRankStep step;
      for (size_t a = 0; a < q.size(); ++a) {
        for (const cpu::Chunk& k : cpu::rank_slice(cpu::kv_source(r, s, P), P, N, p.layout)) {
          const cpu::TileKind kind = mask.classify(q[a].begin, q[a].rows, k.begin, k.rows);
          if (kind == cpu::TileKind::skipped) {
            ++step.pairs_skipped;
            continue;
          }
          const Report& pair = kind == cpu::TileKind::full ? full : diagonal;
          ++(kind == cpu::TileKind::full ? step.pairs_full : step.pairs_diagonal);
          step.kernel_bytes += pair.bytes_total() * p.heads;
          step.ops += pair.ops.times(p.heads);
          if (touched[a]) step.merge_bytes += merge_per_call;
          touched[a] = true;
        }
      }
      step.compute_s = roofline(step.ops, step.kernel_bytes + step.merge_bytes, gpu).seconds();
      out.steps.push_back(step);
    }
  }
  for (cpu::Index s = 0; s < P; ++s) {
    double slowest = 0;
    for (cpu::Index r = 0; r < P; ++r) slowest = std::max(slowest, out.at(r, s).compute_s);
    out.compute_s.push_back(slowest);
    out.step_s.push_back(s + 1 < P ? std::max(slowest, out.link_s) : slowest);
  }
  return out;
}

std::optional<cpu::Index> smallest_hiding_n(const RingProblem& p,
                                            const std::function<bool(cpu::Index)>& hidden,
                                            double sure_from) {
  const cpu::Index step = p.layout == cpu::RingLayout::zigzag ? 2 : 1;
  if (p.ranks == 1) return step;  // nothing is sent
  const cpu::Index top = kMaxLength / step * step;
  // The first multiple of step at or above sure_from, or the search's bound.
  cpu::Index n =
      sure_from >= double(top)
          ? top
          : std::max(step, static_cast<cpu::Index>(std::ceil(sure_from / double(step))) * step);
  if (!hidden(n)) return std::nullopt;
  while (n > step && hidden(n - step)) n -= step;
  return n;
}

double term_hiding_n(double sent_per_nd, double work_per_n2d, double work_per_s,
                     const LinkProfile& link) {
  return sent_per_nd * work_per_s / (work_per_n2d * link.bytes_per_s);
}

// Why hidden(n) is not monotone, on the H200 (F / BW = 161 FLOPs per byte) with fa2's Br =
// 128, Bc = 64: a full pair of c rows moves 2 c d b bytes of K and V for each of its
// Tr = ceil(c / Br) query tiles against 4 c^2 d FLOPs, about Br = 128 FLOPs per byte in bf16,
// fewer than F / BW, so below the matrix term's n a step is bound by its HBM bytes. Those jump
// where the query tile count does: at c = k Br + 1 a new query tile of one row reads K and V again
// (all c keys in a full pair, and in a diagonal pair too, as its last tile sees every key). Between
// jumps (Tr fixed), a full pair's bytes grow as c, like the slice sent, but a diagonal pair's K and
// V are 2 d b (Br Tr (Tr - 1) / 2 + c): a part fixed for the whole band plus c, so the step grows
// more slowly than the send and can fall behind it before the next tile arrives. Causal zigzag on
// IB, P = 2, d = 128 (step 0: one full pair and two diagonal pairs of c = n / 2 rows): hidden at n
// = 20482 (c = 80 Br + 1, just past a jump) up to 20490, not from 20492 to 20736 (c = 81 Br, the
// band's end), hidden for every n from 20738 (c = 81 Br
// + 1: the next jump, 6 c d b bytes at once). The tiles are real (the kernel reads a
// partial tile's K and V in full), so the model is right and the search is not bisection.
std::optional<cpu::Index> hiding_n_per_rank(RingProblem p, const HardwareProfile& gpu,
                                            const LinkProfile& link) {
  // A step sends K and V, 2 n d b bytes a head. Its busiest rank computes every score of an
  // n x n block, or, causal, at least half of them (a diagonal block, or zigzag's two full
  // pairs of n / 2 rows): S = n^2 or n^2 / 2 scores a head. Two terms of its bound, each
  // alone enough:
  //   matrix: fa2 counts 4 d FLOPs per score of every tile it computes: >= 4 S d;
  //   memory: a query tile of at most Br rows reads each key it needs once, so K and V
  //           bring at least 2 d b S / Br bytes (non-causal: n >= Br BW / B).
  // The walk down starts from the smaller of the two n.
  const double b = double(bytes_of(p.dtype));
  const double scores = p.causal == cpu::Causal::none ? 1.0 : 0.5;  // S / n^2
  const double sure_from = std::min(
      term_hiding_n(2 * b, 4 * scores, gpu.matrix_flops_per_s, link),
      term_hiding_n(2 * b, 2 * b * scores / double(p.tiles.Br), gpu.hbm_bytes_per_s, link));
  return smallest_hiding_n(
      p,
      [&](cpu::Index n) {
        p.n_per_rank = n;
        return simulate_ring(p, gpu, link).link_hidden();
      },
      sure_from);
}

}  // namespace flashlab::sim

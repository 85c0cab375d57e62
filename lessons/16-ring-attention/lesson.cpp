// Lesson 16: attention across GPUs (ring attention, context parallelism). The K/V slices
// travel around a ring of P ranks; each rank merges the partial (O, L) of every step with
// lesson 2's merge; the zigzag layout balances causal work; and the link hides behind the
// compute from some N per rank on (the simulator's prediction, NVLink and InfiniBand).
// The backward: the same ring, with the dK, dV accumulators travelling beside K and V.
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/ring.hpp"
#include "flashlab/cpu/ring_backward.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/ring.hpp"
#include "flashlab/sim/ring_backward.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "flashlab/sim/units.hpp"

#include <algorithm>
#include <optional>
#include <string>

namespace flashlab::app {

namespace {

constexpr std::uint64_t kSeed = 16;
constexpr Index kD = 128;

// "rows a-b" of a list of chunks, for the tables.
std::string rows_of(const std::vector<cpu::Chunk>& chunks) {
  std::string out;
  for (const auto& c : chunks)
    out += fmt::format("{}{}-{}", out.empty() ? "" : ", ", c.begin, c.begin + c.rows - 1);
  return out;
}

void merged_states(LessonContext& ctx) {
  ctx.step("Partial states merge across devices exactly as within one");
  constexpr Index kN = 1023, kSmallD = 64;
  const auto in = random_inputs({.N = kN, .d = kSmallD, .seed = kSeed});
  const cpu::Matrix<double> Q = in.Q.cast<double>(), K = in.K.cast<double>(),
                            V = in.V.cast<double>();
  ctx.print(
      "When a sequence outgrows one GPU, each of P ranks keeps a slice of the queries and\n"
      "of the keys and values. A rank's queries must still see every key, so the K/V\n"
      "slices travel: at each of P steps a rank runs the tiled forward on its queries\n"
      "against the K/V slice it holds, which returns (O_s, L_s), and merges it into its\n"
      "running state. (O, L) is itself a state: base m = L, sum l = 1, U = O, because\n"
      "exp(L) = l exp(m). So the merge is lesson 2's, unchanged:\n\n"
      "    m = max(m, L_s),  alpha = exp(m_old - m),  beta = exp(L_s - m)\n"
      "    l = alpha l + beta,  U = alpha U + beta O_s;   at the end O = U / l, L = m + log l\n\n"
      "N = {}, d = {}, fp64, against single-device attention:\n\n",
      kN, kSmallD);
  Table t({"P", "layout", "max |O - O_1 device|", "max |L - L_1 device|"});
  cpu::AttentionOptions causal;
  causal.causal = cpu::Causal::top_left;
  const auto exact = cpu::naive_attention<double>(Q, K, V, causal);
  for (Index P : {1, 2, 3, 4, 8}) {
    for (auto layout : {cpu::RingLayout::contiguous, cpu::RingLayout::zigzag}) {
      const auto r = cpu::ring_attention<double>(Q, K, V, {P, layout}, causal);
      t.add({fmt::format("{}", P), std::string(cpu::to_string(layout)),
             num((r.O - exact.O).cwiseAbs().maxCoeff(), 3),
             num((r.L - exact.L).cwiseAbs().maxCoeff(), 3)});
    }
  }
  ctx.table(t);
  ctx.say(
      "Causal, and N = 1023 divides by none of these P: the slices are uneven, and the result\n"
      "is still attention over all keys, to the last digits of fp64.\n\n");
}

void schedule(LessonContext& ctx) {
  ctx.step("The ring schedule, step by step");
  constexpr Index kP = 4, kN = 16;
  ctx.print(
      "P = {} ranks, N = {} tokens. Rank r starts with slice r; after each step it sends the\n"
      "slice it holds to rank r + 1 and receives rank r - 1's. Which slice each rank holds\n"
      "(named by the rank it started on, with its rows):\n\n",
      kP, kN);
  for (auto layout : {cpu::RingLayout::contiguous, cpu::RingLayout::zigzag}) {
    std::vector<std::string> header{"step"};
    for (Index r = 0; r < kP; ++r)
      header.push_back(
          fmt::format("rank {} (Q rows {})", r, rows_of(cpu::rank_slice(r, kP, kN, layout))));
    Table t(header);
    for (Index s = 0; s < kP; ++s) {
      std::vector<std::string> row{fmt::format("{}", s)};
      for (Index r = 0; r < kP; ++r) {
        const Index src = cpu::kv_source(r, s, kP);
        row.push_back(
            fmt::format("KV {} ({})", src, rows_of(cpu::rank_slice(src, kP, kN, layout))));
      }
      t.add(row);
    }
    ctx.print("{}:\n", cpu::to_string(layout));
    ctx.table(t);
  }
  ctx.print("After {} steps every rank has met every slice once; each slice crossed {} links.\n\n",
            kP, kP - 1);
}

void balance(LessonContext& ctx) {
  ctx.step("Causal work per rank: contiguous against zigzag");
  constexpr Index kP = 4, kN = 4096, kB = 64;
  cpu::AttentionOptions options;
  options.causal = cpu::Causal::top_left;
  options.tiles = {kB, kB};
  ctx.print(
      "Causal, N = {}, P = {}, tiles of {} x {}. Contiguous: rank 0's queries come first and\n"
      "see only its own keys; the last rank's see everything. Zigzag gives rank r chunks r\n"
      "and 2P - 1 - r of 2P: one early, one late. Score tiles computed:\n\n",
      kN, kP, kB, kB);
  const auto contiguous = cpu::ring_work(kN, kN, kP, cpu::RingLayout::contiguous, options);
  const auto zigzag = cpu::ring_work(kN, kN, kP, cpu::RingLayout::zigzag, options);
  Table t({"rank", "contiguous tiles", "zigzag tiles"});
  for (Index r = 0; r < kP; ++r)
    t.add({fmt::format("{}", r), fmt::format("{}", contiguous.computed(r)),
           fmt::format("{}", zigzag.computed(r))});
  ctx.table(t);
  const auto ratio = [&](const cpu::RingWork& w) {
    Index most = 0, least = w.computed(0);
    for (Index r = 0; r < kP; ++r)
      most = std::max(most, w.computed(r)), least = std::min(least, w.computed(r));
    return double(most) / double(least);
  };
  // A step ends when its slowest rank does: the ring's time in tiles is sum_s max_r.
  const auto ring_time = [&](const cpu::RingWork& w) {
    Index total = 0;
    for (Index s = 0; s < kP; ++s) {
      Index slowest = 0;
      for (Index r = 0; r < kP; ++r) slowest = std::max(slowest, w.at(r, s).computed);
      total += slowest;
    }
    return total;
  };
  ctx.print(
      "max/min work: contiguous {}, zigzag {}.\n"
      "Each step lasts as long as its slowest rank: contiguous takes {} tile-times in all,\n"
      "zigzag {} (the work is the same {} tiles; spread evenly it would take {}).\n\n",
      num(ratio(contiguous), 4), num(ratio(zigzag), 4), ring_time(contiguous), ring_time(zigzag),
      kN / kB * (kN / kB + 1) / 2, kN / kB * (kN / kB + 1) / 2 / kP);
}

// The ring both of the simulator's steps run, forward and backward: 8 H200s, 16 heads of d =
// kD, causal, zigzag, each pair of chunks in fa2's tiles; the steps vary n and the mask.
constexpr Index kSimulatedRanks = 8, kSimulatedHeads = 16;
sim::RingProblem simulated_ring() {
  const auto fa2 = gpu::kernel_config(FLASHLAB_KERNEL_FA2, kD, FLASHLAB_BF16);
  return {.ranks = kSimulatedRanks,
          .d = kD,
          .heads = kSimulatedHeads,
          .causal = cpu::Causal::top_left,
          .layout = cpu::RingLayout::zigzag,
          .tiles = {fa2.Br, fa2.Bc}};
}

void overlap(LessonContext& ctx) {
  ctx.step("Does sending the next slice hide behind this step's compute? (the simulator)");
  const auto& h200 = sim::find_profile("h200");
  const auto fa2 = gpu::kernel_config(FLASHLAB_KERNEL_FA2, kD, FLASHLAB_BF16);
  constexpr Index kP = kSimulatedRanks, kHeads = kSimulatedHeads;
  sim::RingProblem p = simulated_ring();
  ctx.print(
      "While a rank computes on the slice it holds, it sends that slice on: 2 n d bf16\n"
      "numbers per head (K and V), n = N per rank. Compute per step grows as n^2, the slice\n"
      "as n, so from some n on the link is never waited for. P = {}, {} heads, d = {}, causal,\n"
      "zigzag; each pair of chunks run as fa2 (Br = {}, Bc = {}) on an H200, and each call's\n"
      "(O, L) merged into the running state in fp32 (read twice, written once): a step\n"
      "takes the roofline bound of that work and those bytes, on its slowest rank. Links\n"
      "per direction: NVLink {:.0f} GB/s, InfiniBand NDR {:.0f} GB/s.\n\n",
      kP, kHeads, kD, fa2.Br, fa2.Bc, sim::find_link("nvlink-h200").bytes_per_s / 1e9,
      sim::find_link("ib-ndr").bytes_per_s / 1e9);
  Table t(
      {"N per rank", "slice sent", "compute/step", "NVLink/step", "hidden", "IB/step", "hidden"});
  for (Index n : {1024, 4096, 16384, 131072}) {
    p.n_per_rank = n;
    const auto nv = sim::simulate_ring(p, h200, sim::find_link("nvlink-h200"));
    const auto ib = sim::simulate_ring(p, h200, sim::find_link("ib-ndr"));
    const double compute = *std::min_element(nv.compute_s.begin(), nv.compute_s.end() - 1);
    t.add({fmt::format("{}", n), sim::format_bytes(double(nv.link_bytes_per_step)),
           fmt::format("{:.1f} us", compute * 1e6), fmt::format("{:.1f} us", nv.link_s * 1e6),
           nv.link_hidden() ? "yes" : "no", fmt::format("{:.1f} us", ib.link_s * 1e6),
           ib.link_hidden() ? "yes" : "no"});
  }
  ctx.table(t);
  for (const char* link : {"nvlink-h200", "ib-ndr"}) {
    for (auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
      p.causal = causal;
      const auto n = sim::hiding_n_per_rank(p, h200, sim::find_link(link));
      ctx.print("{:<12} {:<10}: the link hides at every N per rank from {}\n", link,
                causal == cpu::Causal::none ? "non-causal" : "causal",
                n ? fmt::format("{}", *n) : std::string("(never, up to 2^22)"));
    }
  }
  ctx.say(
      "\nCausal steps do half the work of non-causal ones (zigzag: two of four chunk pairs),\n"
      "so the slice needs more N to hide. At small N the step's bytes (Q, O, the merges) grow\n"
      "as N, not N^2, so a link 9 times slower needs far more than 9 times the N. The bound\n"
      "is a lower bound on a step's time, so a real kernel, slower than the bound, hides the\n"
      "link from a smaller N still.\n"
      "\"From\" means from there on: below it the link may hide at one N and not at a larger\n"
      "one. A step's bytes jump where its count of query tiles, ceil(rows / Br), does (the new\n"
      "tile reads K and V again), then grow more slowly than the slice until the next jump.\n"
      "On a GPU: bench/gpu/ring_attention.py runs this ring with flashlab's kernel, P ranks\n"
      "through NCCL (torchrun) or emulated as streams on one GPU (--emulate P).\n\n");
}

void backward_exact(LessonContext& ctx) {
  ctx.step("The backward over the ring: what travels, and why dK and dV travel");
  constexpr Index kN = 1023, kSmallD = 64;
  const auto in = random_inputs({.N = kN, .d = kSmallD, .seed = kSeed});
  const cpu::Matrix<double> Q = in.Q.cast<double>(), K = in.K.cast<double>(),
                            V = in.V.cast<double>();
  const cpu::Matrix<double> dO = random_inputs({.N = kN, .d = kSmallD, .seed = kSeed + 1})
                                     .Q.cast<double>();  // the loss's gradient, any matrix
  ctx.print(
      "The backward (lesson 6) needs, per query row, Q, dO, O and L, and D = rowsum(dO o O):\n"
      "all of them are on the rank that owns the row. L is the merged log-sum-exp of the\n"
      "whole row, so a pair's P = exp(S - L) is already the final probability: unlike the\n"
      "forward, the backward merges nothing. Each rank runs the tiled backward of its\n"
      "queries against the K/V slice it holds, step by step, as in the forward:\n\n"
      "    dQ_r       += dS K * scale        dQ belongs to the queries: it stays on rank r\n"
      "    dK_s, dV_s += dS^T Q * scale, P^T dO   they belong to the keys, which are elsewhere\n\n"
      "So dK and dV travel too, as accumulators that follow their slice: rank r keeps its\n"
      "share of its own slice from step 0; the accumulator of slice r is born on rank r + 1\n"
      "at step 1, gathers one share per step, and comes home to rank r after step P - 1,\n"
      "where the kept share is added. Like K and V, it crosses P - 1 links.\n\n"
      "N = {}, d = {}, causal, fp64; the ring's gradients against the single-device\n"
      "backward given the same O and L (largest error over the largest entry):\n\n",
      kN, kSmallD);
  cpu::AttentionOptions causal;
  causal.causal = cpu::Causal::top_left;
  const auto exact = cpu::naive_attention<double>(Q, K, V, causal);
  const auto one = cpu::backward_kv_outer<double>(Q, K, V, exact.O, exact.L, dO, causal);
  const auto relative = [](const cpu::Matrix<double>& a, const cpu::Matrix<double>& b) {
    return (a - b).cwiseAbs().maxCoeff() / std::max(1.0, b.cwiseAbs().maxCoeff());
  };
  Table t({"P", "layout", "dQ", "dK", "dV"});
  for (Index P : {1, 2, 3, 4, 8}) {
    for (auto layout : {cpu::RingLayout::contiguous, cpu::RingLayout::zigzag}) {
      const auto g = cpu::ring_backward<double>(Q, K, V, exact.O, exact.L, dO, {P, layout}, causal);
      t.add({fmt::format("{}", P), std::string(cpu::to_string(layout)),
             num(relative(g.dQ, one.dQ), 3), num(relative(g.dK, one.dK), 3),
             num(relative(g.dV, one.dV), 3)});
    }
  }
  ctx.table(t);
  ctx.say(
      "The same scores and probabilities, summed in another order: the errors are fp64\n"
      "rounding. dK and dV collect a share on every rank; dQ only on its own.\n\n");
}

void backward_overlap(LessonContext& ctx) {
  ctx.step("The backward's bytes on the links, and when they hide (the simulator)");
  const auto& h200 = sim::find_profile("h200");
  const auto facts = *backward_kernel_facts(kD, sim::DType::bf16, false).facts;
  constexpr Index kP = kSimulatedRanks, kHeads = kSimulatedHeads;
  constexpr auto kBusiest = static_cast<size_t>(2);  // sends a K/V slice and an accumulator
  sim::RingProblem p = simulated_ring();
  ctx.print(
      "Per link over the run, with n rows per rank and H heads: the forward sends K and V,\n"
      "(P - 1) 2 n d bf16 numbers per head; the backward sends them too, and the dK, dV\n"
      "accumulators beside them, (P - 1) 2 n d more in fp32 (a sum of P shares kept in bf16\n"
      "would round at every hop): (P - 1) 2 n d (2 + 4) H bytes, three times the forward's.\n"
      "While step s computes, a link carries the K/V slice of step s + 1 and the\n"
      "accumulator closed after step s - 1; the one closed after the last step goes home\n"
      "with nothing left to hide behind.\n\n"
      "P = {}, {} heads, d = {}, causal, zigzag; each pair of chunks run as flashlab's\n"
      "backward (Br = {}, Bc = {}) on an H200, its dQ, dK, dV shares added into fp32; a\n"
      "step's compute is the roofline bound of its work and bytes on its slowest rank, and\n"
      "step {} is the busiest for the links:\n\n",
      kP, kHeads, kD, facts.Br, facts.Bc, kBusiest);
  Table t({"N per rank", "fwd sends", "bwd sends", "fwd compute/step", "bwd compute/step",
           "bwd NVLink/step", "hidden", "bwd IB/step", "hidden"});
  double bytes_ratio = 0;  // a backward step's HBM bytes over a forward step's, at 4096
  for (Index n : {1024, 4096, 16384, 131072}) {
    p.n_per_rank = n;
    const auto nv = sim::simulate_ring_backward(p, facts, h200, sim::find_link("nvlink-h200"));
    const auto ib = sim::simulate_ring_backward(p, facts, h200, sim::find_link("ib-ndr"));
    const auto fwd = sim::simulate_ring(p, h200, sim::find_link("nvlink-h200"));
    if (n == 4096) {
      const auto& b = nv.at(0, kBusiest);
      const auto& f = fwd.at(0, kBusiest);
      bytes_ratio =
          double(b.kernel_bytes + b.accumulate_bytes) / double(f.kernel_bytes + f.merge_bytes);
    }
    t.add({fmt::format("{}", n), sim::format_bytes(double(fwd.link_bytes)),
           sim::format_bytes(double(nv.link_bytes)),
           fmt::format("{:.1f} us", fwd.compute_s[kBusiest] * 1e6),
           fmt::format("{:.1f} us", nv.compute_s[kBusiest] * 1e6),
           fmt::format("{:.1f} us", nv.link_s[kBusiest] * 1e6), nv.link_hidden() ? "yes" : "no",
           fmt::format("{:.1f} us", ib.link_s[kBusiest] * 1e6), ib.link_hidden() ? "yes" : "no"});
  }
  ctx.table(t);
  int sooner = 0, same = 0, later = 0;
  for (const char* link : {"nvlink-h200", "ib-ndr"}) {
    for (auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
      p.causal = causal;
      const auto& l = sim::find_link(link);
      const auto forward = sim::hiding_n_per_rank(p, h200, l);
      const auto backward = sim::hiding_n_per_rank_backward(p, facts, h200, l);
      const auto text = [](const std::optional<Index>& n) {
        return n ? fmt::format("{}", *n) : std::string("(never, up to 2^22)");
      };
      ctx.print(
          "{:<12} {:<10}: the backward's link hides at every N per rank from {} (forward: {})\n",
          link, causal == cpu::Causal::none ? "non-causal" : "causal", text(backward),
          text(forward));
      const Index never = Index{1} << 23;
      const Index b = backward.value_or(never), f = forward.value_or(never);
      ++(b < f ? sooner : b == f ? same : later);
    }
  }
  ctx.print(
      "\nAgainst the forward, the backward hides from\n"
      "a smaller N in {} of these 4 cases, the same N in {}, a larger N in {}.\n"
      "Three times the bytes on the link, and yet: at N = 4096 a backward step moves {} times\n"
      "a forward step's bytes through memory (the mirror books dQ's fp32 atomics at the L2,\n"
      "Q and dO read again for every KV tile, and the ring's fp32 accumulations), on top of\n"
      "about 2.5 times its FLOPs. The roofline charges all of those bytes at HBM bandwidth,\n"
      "so a backward step is long beside what it sends. Where a GPU serves the atomics from\n"
      "its L2 faster than from HBM, its steps are shorter than this, and its sends harder to\n"
      "hide than the bound says.\n"
      "On a GPU: bench/gpu/ring_attention.py --backward runs this ring's backward with\n"
      "flashlab's kernel on each pair, P ranks emulated on one GPU (--emulate P).\n\n",
      sooner, same, later, num(bytes_ratio, 3));
}

}  // namespace

void run_lesson_16(LessonContext& ctx) {
  merged_states(ctx);
  schedule(ctx);
  balance(ctx);
  overlap(ctx);
  backward_exact(ctx);
  backward_overlap(ctx);
  ctx.finish("back to `flashlab lessons`, or run the ring on a GPU: bench/gpu/ring_attention.py.");
}

}  // namespace flashlab::app

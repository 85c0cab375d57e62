// `flashlab ring`: ring attention across P GPUs, counted by the simulator (sim/ring.hpp):
// each rank's HBM bytes, the bytes each link carries, whether sending the next K/V slice
// hides behind each step's compute, and the N per rank from which it does. With --pass
// backward, the same for the ring's backward (sim/ring_backward.hpp): the GPU backward on
// each pair of chunks, and the dK, dV accumulators that travel with the K/V slices.
//   flashlab ring --ranks 8 --n-per-rank 16384 --d 128 --heads 16 --causal --link ib-ndr
//   flashlab ring --pass backward --ranks 8 --n-per-rank 16384 --heads 16 --causal
#include "commands.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "kit/terminal.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/ring.hpp"
#include "flashlab/sim/ring_backward.hpp"
#include "flashlab/sim/limits.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <iostream>
#include <optional>
#include <string>

namespace flashlab::app {

namespace {

struct RingArgs {
  std::string ranks = "2", n_per_rank = "16384", d = "128", heads = "1";
  std::string layout = "zigzag", link = "nvlink-h200", profile = "h200", pass = "forward";
  bool causal = false, no_colour = false;
};

// A ring has at least two ranks (one rank sends nothing). At most 256: more than any machine's
// ring, and the P^2 pairs of chunks then take some 20 s forward and 50 s backward to count.
constexpr std::int64_t kMinRanks = 2;
constexpr std::int64_t kMaxRanks = 256;

cpu::RingLayout parse_layout(const std::string& name) {
  if (name == "contiguous") return cpu::RingLayout::contiguous;
  if (name == "zigzag") return cpu::RingLayout::zigzag;
  throw cpu::InvalidArgument("--layout " + name + ": the layouts are contiguous and zigzag");
}

sim::RingProblem problem_of(const RingArgs& a) {
  sim::RingProblem p;
  p.ranks = parse_integer("--ranks", a.ranks, kMinRanks, kMaxRanks);
  p.n_per_rank = parse_integer("--n-per-rank", a.n_per_rank, 1, sim::kMaxLength);
  p.d = parse_integer("--d", a.d, 1, sim::kMaxHeadDim);
  p.heads = parse_integer("--heads", a.heads, 1, std::int64_t{1} << 20);
  p.causal = a.causal ? cpu::Causal::top_left : cpu::Causal::none;
  p.layout = parse_layout(a.layout);
  // The tiles of the forward kernel each pair of chunks runs on: fa2's, from its description.
  const auto fa2 = gpu::kernel_config(FLASHLAB_KERNEL_FA2, p.d, FLASHLAB_BF16);
  if (fa2.Br == 0)
    throw cpu::InvalidArgument(
        fmt::format("--d {}: the ring runs fa2 on each pair of chunks, and {}", p.d,
                    gpu::kernel_info(FLASHLAB_KERNEL_FA2, p.d, FLASHLAB_BF16).reason));
  p.tiles = {fa2.Br, fa2.Bc};
  return p;
}

// Each rank's HBM bytes over the run, the kernels' and the extra step's (the forward's merges,
// the backward's accumulators: `extra`, named `extra_name`), and the chunk pairs it computed.
template <class Report, class Step>
void print_rank_totals(const Report& r, cpu::Index ranks, const char* extra_name,
                       sim::Bytes Step::*extra, const Style& style) {
  Table table({"rank", "HBM bytes (kernels)", extra_name, "pairs computed"});
  for (cpu::Index rank = 0; rank < ranks; ++rank) {
    sim::Bytes kernels = 0, extras = 0;
    cpu::Index pairs = 0;
    for (cpu::Index s = 0; s < ranks; ++s) {
      const Step& step = r.at(rank, s);
      kernels += step.kernel_bytes;
      extras += step.*extra;
      pairs += step.pairs_full + step.pairs_diagonal;
    }
    table.add({fmt::format("{}", rank), sim::format_bytes(double(kernels)),
               sim::format_bytes(double(extras)), fmt::format("{}", pairs)});
  }
  table.print(std::cout, style, 0);
}

// A line for an N that hides although it is below the N from which every N hides: the
// step's HBM bytes jump where its query tile count does (sim/ring.cpp says which term).
std::string below_hiding_n(bool hidden, cpu::Index n, const std::optional<cpu::Index>& from) {
  if (!hidden || (from && n >= *from)) return "";
  return "It hides at this N but not at every larger one: a step's HBM bytes jump where its "
         "count of query tiles (ceil(rows / Br)) does, and fall behind the send before the next "
         "jump.\n";
}

void ring_forward(const RingArgs& a, const sim::RingProblem& p, const sim::HardwareProfile& gpu,
                  const sim::LinkProfile& link) {
  const sim::RingReport r = sim::simulate_ring(p, gpu, link);
  const Style style = Style::for_stdout(a.no_colour);
  std::cout << fmt::format(
      "ring of P = {} ranks, N per rank = {} (N = {}), d = {}, {} heads, bf16, {}, {}; fa2 "
      "tiles Br = {}, Bc = {}; {} and {} ({:.0f} GB/s per direction)\n\n",
      p.ranks, p.n_per_rank, p.ranks * p.n_per_rank, p.d, p.heads,
      a.causal ? "causal" : "non-causal", cpu::to_string(p.layout), p.tiles.Br, p.tiles.Bc,
      gpu.name, link.name, link.bytes_per_s / 1e9);
  print_rank_totals(r, p.ranks, "HBM bytes (merges)", &sim::RingRankStep::merge_bytes, style);
  std::cout << fmt::format("\nEach link carries {} per step, {} over the run ((P - 1) steps).\n\n",
                           sim::format_bytes(double(r.link_bytes_per_step)),
                           sim::format_bytes(double(r.link_bytes)));
  Table steps({"step", "compute (slowest rank)", "send", "step time", "send hidden"});
  for (cpu::Index s = 0; s < p.ranks; ++s) {
    const bool sends = s + 1 < p.ranks;
    const double compute = r.compute_s[static_cast<size_t>(s)];
    steps.add({fmt::format("{}", s), fmt::format("{:.1f} us", compute * 1e6),
               sends ? fmt::format("{:.1f} us", r.link_s * 1e6) : "-",
               fmt::format("{:.1f} us", r.step_s[static_cast<size_t>(s)] * 1e6),
               sends ? (compute >= r.link_s ? "yes" : "no") : "-"});
  }
  steps.print(std::cout, style, 0);
  const auto hides = sim::hiding_n_per_rank(p, gpu, link);
  std::cout << fmt::format(
      "\nThe ring takes {:.1f} us (a lower bound). The send {} at this N; it hides at every N "
      "per rank from {}.\n{}",
      r.seconds() * 1e6, r.link_hidden() ? "hides at every step" : "does not hide",
      hides ? fmt::format("{}", *hides) : std::string("(never, up to 2^22)"),
      below_hiding_n(r.link_hidden(), p.n_per_rank, hides));
}

// The backward each pair of chunks runs: flashlab's GPU backward, from its description.
sim::BackwardKernelFacts backward_facts(const RingArgs& a) {
  const cpu::Index d = parse_integer("--d", a.d, 1, sim::kMaxHeadDim);
  const BackwardFacts f = backward_kernel_facts(d, sim::DType::bf16, /*deterministic=*/false);
  if (!f.facts)
    throw cpu::InvalidArgument(fmt::format(
        "--pass backward: the ring runs flashlab's backward on each pair of chunks, and {}",
        f.why_not));
  return *f.facts;
}

void ring_backward(const RingArgs& a, const sim::RingProblem& p,
                   const sim::BackwardKernelFacts& facts, const sim::HardwareProfile& gpu,
                   const sim::LinkProfile& link) {
  const sim::RingBackwardReport r = sim::simulate_ring_backward(p, facts, gpu, link);
  const Style style = Style::for_stdout(a.no_colour);
  std::cout << fmt::format(
      "ring backward of P = {} ranks, N per rank = {} (N = {}), d = {}, {} heads, bf16, {}, {}; "
      "backward tiles Br = {}, Bc = {}; {} and {} ({:.0f} GB/s per direction)\n\n",
      p.ranks, p.n_per_rank, p.ranks * p.n_per_rank, p.d, p.heads,
      a.causal ? "causal" : "non-causal", cpu::to_string(p.layout), facts.Br, facts.Bc, gpu.name,
      link.name, link.bytes_per_s / 1e9);
  print_rank_totals(r, p.ranks, "HBM bytes (accumulators)",
                    &sim::RingBackwardRankStep::accumulate_bytes, style);
  std::cout << fmt::format(
      "\nK and V {} and dK and dV {} a send; each link carries {} over the run ((P - 1) sends "
      "of each; the forward's: {}).\n\n",
      sim::format_bytes(double(r.kv_bytes_per_send)),
      sim::format_bytes(double(r.gradient_bytes_per_send)), sim::format_bytes(double(r.link_bytes)),
      sim::format_bytes(double((p.ranks - 1) * r.kv_bytes_per_send)));
  Table steps({"step", "compute (slowest rank)", "bytes sent meanwhile", "send time", "step time",
               "send hidden"});
  for (cpu::Index s = 0; s < p.ranks; ++s) {
    const auto i = static_cast<size_t>(s);
    const bool sends = r.link_bytes_in_step[i] > 0;
    steps.add({fmt::format("{}", s), fmt::format("{:.1f} us", r.compute_s[i] * 1e6),
               sends ? sim::format_bytes(double(r.link_bytes_in_step[i])) : "-",
               sends ? fmt::format("{:.1f} us", r.link_s[i] * 1e6) : "-",
               fmt::format("{:.1f} us", r.step_s[i] * 1e6),
               sends ? (r.compute_s[i] >= r.link_s[i] ? "yes" : "no") : "-"});
  }
  steps.print(std::cout, style, 0);
  const auto hides = sim::hiding_n_per_rank_backward(p, facts, gpu, link);
  std::cout << fmt::format(
      "\nAfter the last step the dK, dV accumulators go home and are added: {:.1f} us that "
      "nothing hides.\nThe ring backward takes {:.1f} us (a lower bound). The sends {} at this "
      "N; they hide at every N per rank from {}.\n{}",
      r.tail_s * 1e6, r.seconds() * 1e6, r.link_hidden() ? "hide at every step" : "do not hide",
      hides ? fmt::format("{}", *hides) : std::string("(never, up to 2^22)"),
      below_hiding_n(r.link_hidden(), p.n_per_rank, hides));
}

void ring(const RingArgs& a) {
  if (a.pass != "forward" && a.pass != "backward")
    throw cpu::InvalidArgument(fmt::format(
        "--pass {}: the ring runs forward or backward (decode and fa3 are single-GPU passes "
        "of `flashlab simulate`)",
        a.pass));
  if (a.pass == "backward") {
    const sim::BackwardKernelFacts facts = backward_facts(a);  // its refusal first
    return ring_backward(a, problem_of(a), facts, sim::find_profile(a.profile),
                         sim::find_link(a.link));
  }
  const sim::RingProblem p = problem_of(a);
  const auto& gpu = sim::find_profile(a.profile);
  const auto& link = sim::find_link(a.link);
  ring_forward(a, p, gpu, link);
}

}  // namespace

void add_ring_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "ring",
      "Ring attention across P GPUs, counted: HBM and link bytes, when the link hides "
      "(forward or backward)");
  auto& a = arguments_of<RingArgs>(cmd, ring);
  cmd->add_option("--pass", a.pass,
                  "forward (the default) or backward: the ring's forward, or its backward with "
                  "the dK, dV accumulators travelling with K and V");
  cmd->add_option(
      "--ranks", a.ranks,
      fmt::format("P, the GPUs in the ring, {} to {} (default 2)", kMinRanks, kMaxRanks));
  cmd->add_option("--n-per-rank", a.n_per_rank, "queries and keys each rank holds (default 16384)");
  cmd->add_option("--d", a.d, "head dimension (default 128)");
  cmd->add_option("--heads", a.heads, "batch x heads (default 1)");
  cmd->add_flag("--causal", a.causal, "causal mask (top-left; N_q = N_k)");
  cmd->add_option("--layout", a.layout, "contiguous or zigzag (default zigzag)");
  cmd->add_option("--link", a.link, "nvlink-h200 or ib-ndr (default nvlink-h200)");
  cmd->add_option("--profile", a.profile, "the GPU's hardware profile (default h200)");
  add_no_color_flag(cmd, a.no_colour);
}

}  // namespace flashlab::app

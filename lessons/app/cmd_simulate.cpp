// `flashlab simulate`: run naive attention, FA1 and FA2 on the simulated HBM + SRAM and
// print what each moves, computes and keeps on chip, and the bound a GPU profile sets;
// with --pass backward or decode, the mirror of that GPU pass (simulate_pass.cpp).
//   flashlab simulate --n 8192 --d 128 --dtype bf16 --sram 96KiB --algo naive,fa1,fa2
//   flashlab simulate --pass backward --n 8192 --d 128 --heads 16 --causal
#include "commands.hpp"
#include "output_file.hpp"
#include "progress.hpp"
#include "simulate_pass.hpp"

#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/table.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <random>

namespace flashlab::app {

namespace {

// --full computes the numbers on this CPU; naive attention there holds several N x N
// matrices, about 1.5 GiB at this N.
constexpr cpu::Index kMaxFullN = 8192;
// What one step of a --trace file takes (a JSON line with the step, the tile, its bytes):
// about 150 bytes; counted generously so that the estimate is an upper bound.
constexpr std::int64_t kTraceBytesPerStep = 256;
constexpr std::int64_t kDefaultMaxTraceBytes = 256ll << 20;

struct SimulateArgs {
  cpu::Index n = 8192, d = 128;
  std::string dtype = "bf16", sram, l2, algorithms = "naive,fa1,fa2", profile = "h200", trace;
  std::int64_t max_trace_bytes = kDefaultMaxTraceBytes;
  bool causal = false, json = false, full = false;
  TileOptions tile_options;
  std::string pass = "forward";
  PassArgs pass_args;
  CLI::App* cmd = nullptr;
};

sim::Problem problem_of(const SimulateArgs& a, const sim::HardwareProfile& hw) {
  sim::Problem p;
  p.N = a.n;
  p.d = a.d;
  p.dtype = sim::parse_dtype(a.dtype);
  p.causal = a.causal ? cpu::Causal::top_left : cpu::Causal::none;
  p.sram_bytes = a.sram.empty() ? hw.sram_per_sm : sim::parse_capacity(a.sram, p.dtype);
  if (!a.l2.empty()) p.l2_bytes = sim::parse_capacity(a.l2, p.dtype);
  p.tiles = a.tile_options.tiles();
  sim::check(p);
  return p;
}

// cpu_reference's O for the same problem, to set beside the simulator's.
template <class In>
cpu::Matrix<float> reference_O(sim::Algorithm a, const sim::Report& r, const cpu::Matrix<In>& Q,
                               const cpu::Matrix<In>& K, const cpu::Matrix<In>& V) {
  cpu::AttentionOptions options;
  options.causal = r.problem.causal;
  if (r.tiles) options.tiles = r.tiles->tiles;
  switch (a) {
    case sim::Algorithm::naive:
    case sim::Algorithm::naive_kernel:
      return cpu::naive_attention<In>(Q, K, V, options).O.template cast<float>();
    case sim::Algorithm::fa1: return cpu::forward_kv_outer<In>(Q, K, V, options).O;
    case sim::Algorithm::fa2:
      return cpu::round_to<In>(cpu::forward_q_outer<In>(Q, K, V, options).O).template cast<float>();
  }
  return {};
}

// The program on random inputs: its report, and how far its O is from cpu_reference's.
template <class In>
sim::Report run_full(sim::Algorithm a, const sim::Problem& p, const sim::TraceSink& trace,
                     std::string& note) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&] {
    return cpu::Matrix<float>(
               cpu::Matrix<float>::NullaryExpr(p.N, p.d, [&] { return normal(rng); }))
        .template cast<In>()
        .eval();
  };
  const cpu::Matrix<In> Q = random(), K = random(), V = random();
  auto sim = sim::simulate<In>(a, p, Q, K, V, trace);
  const float diff = (sim.O - reference_O<In>(a, sim.report, Q, K, V)).cwiseAbs().maxCoeff();
  note += fmt::format("{}: max |O - cpu_reference's O| = {:.3g} on random normal inputs\n",
                      sim::to_string(a), diff);
  return std::move(sim.report);
}

sim::Report run_one(sim::Algorithm a, const sim::Problem& p, const SimulateArgs& args,
                    const sim::TraceSink& trace, std::string& note) {
  ProgressLine progress(fmt::format("simulate {}", sim::to_string(a)), sim::estimate(a, p).steps);
  if (!args.full) return sim::count(a, p, trace, std::ref(progress));
  switch (p.dtype) {
    case sim::DType::fp32: return run_full<float>(a, p, trace, note);
    case sim::DType::bf16: return run_full<cpu::bf16>(a, p, trace, note);
    case sim::DType::fp16: return run_full<cpu::fp16>(a, p, trace, note);
  }
  return {};
}

// A --trace file holds a line per step: refused before the run when it would pass the limit.
void check_trace_size(const sim::Estimate& e, const SimulateArgs& args) {
  const double bytes = double(e.steps) * kTraceBytesPerStep;
  if (bytes > double(args.max_trace_bytes))
    throw cpu::InvalidArgument(fmt::format(
        "--trace would write {} steps, up to {} of JSON lines, more than the {} allowed; raise "
        "the limit with --max-trace-bytes, or trace a smaller N",
        e.steps, sim::format_bytes(bytes), sim::format_bytes(double(args.max_trace_bytes))));
}

void simulate(const SimulateArgs& args) {
  const Pass pass = parse_pass(args.pass, /*takes_fa3=*/true);
  check_pass_options(args.cmd, pass);
  const sim::HardwareProfile& hw = sim::find_profile(args.profile);
  if (pass != Pass::forward)
    return simulate_pass(args.cmd, pass, args.pass_args, args.n, args.d, args.dtype, args.causal,
                         args.json, hw);
  const sim::Problem p = problem_of(args, hw);
  const auto algorithms = sim::parse_algorithms(args.algorithms);
  if (args.full && p.N > kMaxFullN)
    throw cpu::InvalidArgument(fmt::format(
        "--full computes the numbers on this CPU and takes N <= {}; N = {} can be counted "
        "without --full",
        kMaxFullN, p.N));
  if (!args.trace.empty() && algorithms.size() != 1)
    throw cpu::InvalidArgument("--trace records one program: give one --algo with it");
  if (!args.trace.empty()) check_trace_size(sim::estimate(algorithms.front(), p), args);

  std::optional<OutputFile> trace_file;
  std::unique_ptr<sim::JsonlTrace> trace;
  if (!args.trace.empty()) {
    trace_file.emplace("--trace", args.trace);
    trace = std::make_unique<sim::JsonlTrace>(trace_file->stream());
  }
  std::vector<sim::Report> reports;
  std::string note;
  for (const sim::Algorithm a : algorithms)
    reports.push_back(run_one(a, p, args, trace ? trace->sink() : sim::TraceSink{}, note));
  if (trace_file) trace_file->commit();

  if (args.json) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& r : reports) {
      auto j = sim::to_json(r);
      const sim::Bound b = sim::roofline(r, hw);
      j["bound"] = {{"profile", hw.name},     {"seconds", b.seconds()}, {"binds", b.binding()},
                    {"matrix_s", b.matrix_s}, {"exp_s", b.exp_s},       {"memory_s", b.memory_s}};
      out.push_back(std::move(j));
    }
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}", sim::format_table(reports, &hw));
    if (!note.empty()) fmt::print("\n{}", note);
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Count the HBM bytes, work and SRAM of naive attention, FA1 and FA2");
  auto& args = arguments_of<SimulateArgs>(cmd, simulate);
  args.cmd = cmd;
  cmd->add_option("--pass", args.pass,
                  "forward (the paper's programs), or backward, decode or fa3 (the GPU "
                  "kernels' mirrors)")
      ->capture_default_str();
  add_integer_option<cpu::Index>(cmd, "--n", args.n, "sequence length N", 1);
  add_integer_option<cpu::Index>(cmd, "--d", args.d, "head dimension d", 1);
  cmd->add_option("--dtype", args.dtype, "fp32, bf16 or fp16")->capture_default_str();
  cmd->add_option(
      "--sram", args.sram,
      "SRAM one thread block may use, in bytes (e.g. 96KiB) or elements of the dtype (e.g. "
      "49152el); default: the profile's sram_per_sm");
  cmd->add_option("--l2", args.l2,
                  "an L2 of this size between HBM and SRAM (LRU), e.g. 60MiB: predicts DRAM bytes");
  cmd->add_option("--algo", args.algorithms,
                  "programs to run: naive,fa1,fa2 (the paper's) or naive-kernel (flashlab's naive "
                  "kernel as built)")
      ->capture_default_str();
  cmd->add_option("--profile", args.profile, "a100, h100, h200 or b200")->capture_default_str();
  cmd->add_flag("--causal", args.causal,
                "causal mask (top-left; backward: bottom-right when N_q != N)");
  args.tile_options.add_to(cmd);
  cmd->add_flag("--json", args.json, "print the reports as JSON");
  cmd->add_option("--trace", args.trace, "write every step as JSON lines to this file");
  add_integer_option<std::int64_t>(cmd, "--max-trace-bytes", args.max_trace_bytes,
                                   "refuse a --trace file estimated larger than this", 1);
  cmd->add_flag("--full", args.full,
                "compute the numbers too, on random inputs (N <= 8192); traces then carry m, l, U");
  add_pass_options(cmd, args.pass_args);
}

}  // namespace flashlab::app

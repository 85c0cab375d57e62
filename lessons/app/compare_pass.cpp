// `flashlab compare --pass backward|decode`: what the simulator's mirror of the GPU pass
// predicts (gpu_bridge/pass_kernels.hpp: the kernels' facts, configured in one place), each
// kernel's grid on the target GPU, and the GPU's row: the pass run through the GPU runner
// (runner_abi.h) on fresh random inputs of the shape (from --seed), the median of --repeats
// calls timed by CUDA events, and the bytes into and out of the SMs, at the L2 and at DRAM as
// Nsight Compute counts them over the pass's kernels (ncu runs this same program in the hidden
// --gpu-only mode, which runs the pass once). Without a GPU, the row says why it is empty.
//   flashlab compare --pass backward --n 4096 --d 128 --heads 16 --kv-heads 4 --causal
//   flashlab compare --pass decode --n 32768 --n-q 1 --d 128 --batch 8 --heads 32 --kv-heads 8
#include "compare_pass.hpp"

#include "commands.hpp"
#include "kernel_bytes.hpp"
#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/ncu_bytes.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "kit/terminal.hpp"

#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <stdexcept>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <functional>
#include <iostream>
#include <limits>
#include <random>

namespace flashlab::app {

namespace {

// compare's options that only its forward comparison takes, and those only one pass takes.
constexpr std::array<std::string_view, 2> kForwardOnly = {"--kernels", "--fa3-kv-l2-share"};
constexpr std::array<std::string_view, 7> kPassOptions = {
    "--batch",  "--kv-heads",  "--deterministic", "--no-grid-model",
    "--splits", "--page-size", "--grid"};
struct PassOption {
  std::string_view option;
  Pass pass;
  bool forward_too = false;  // the forward comparison takes it as well
};
constexpr std::array kPassOnly = {PassOption{"--deterministic", Pass::backward},
                                  PassOption{"--no-grid-model", Pass::backward},
                                  PassOption{"--splits", Pass::decode},
                                  PassOption{"--page-size", Pass::decode},
                                  PassOption{"--grid", Pass::decode},
                                  PassOption{"--causal", Pass::backward, true}};
// Where an option of a pass belongs, for a refusal: "--pass backward", or with the forward.
std::string where_taken(const PassOption& o) {
  return fmt::format("{}--pass {}", o.forward_too ? "the forward comparison and " : "",
                     to_string(o.pass));
}

}  // namespace

void check_compare_pass_options(const CLI::App* cmd, Pass pass) {
  if (pass == Pass::fa3)
    throw cpu::InvalidArgument(
        "--pass fa3 is simulate's: compare runs the fa3 kernel in its forward comparison "
        "(--kernels fa3)");
  for (const std::string_view o : kForwardOnly)
    if (cmd->count(std::string(o)) > 0)
      throw cpu::InvalidArgument(fmt::format(
          "{} is an option of the forward comparison, not of --pass {}", o, to_string(pass)));
  for (const PassOption& o : kPassOnly)
    if (cmd->count(std::string(o.option)) > 0 && o.pass != pass)
      throw cpu::InvalidArgument(fmt::format("{} is an option of {}, not of --pass {}", o.option,
                                             where_taken(o), to_string(pass)));
}

namespace {

cpu::Index kv_heads_of(const ComparePassArgs& a, cpu::Index heads) {
  const cpu::Index kv = a.kv_heads > 0 ? a.kv_heads : heads;
  if (kv > heads || heads % kv != 0)
    throw cpu::InvalidArgument(fmt::format(
        "--kv-heads {} does not divide --heads {}: give a divisor of {} (1 for multi-query "
        "attention)",
        kv, heads, heads));
  return kv;
}

std::string bytes(double b) { return sim::format_bytes(b); }

struct Row {
  std::string executor, time, predicted, measured, ratio = "-";
};

// with_grid: the grid model's DRAM too, where it runs the pass (grid_dram).
Row simulator_row(const PassPrediction& p, bool with_grid) {
  if (!p.report) return {"simulator: " + p.label, "-", "not modelled: " + p.why_not, "-"};
  const sim::Bound b = sim::roofline(*p.report, target_profile());
  const auto dram = compulsory_dram(p);
  const auto grid = with_grid ? grid_dram(p) : std::nullopt;
  return {"simulator: " + p.label, fmt::format("model (bound {:.1f} us)", b.seconds() * 1e6),
          fmt::format("SMs read {}, write {}", bytes(double(p.report->bytes_read())),
                      bytes(double(p.report->bytes_written()))) +
              (dram ? fmt::format("; DRAM from a cold L2, at least {} read, {} written",
                                  bytes(double(dram->read)), bytes(double(dram->written)))
                    : std::string()) +
              (grid ? fmt::format("; the grid model: {} read, {} written",
                                  bytes(double(grid->read)), bytes(double(grid->written)))
                    : std::string()),
          "-"};
}

// (batch, heads, rows, d) of standard normal entries, one stream per seed.
cpu::HeadTensor<float> random_heads(cpu::Index batch, cpu::Index heads, cpu::Index rows,
                                    cpu::Index d, std::uint64_t seed) {
  cpu::HeadTensor<float> t(batch, heads, rows, d);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : t.data) x = normal(rng);
  return t;
}

// The backward on the GPU. The runner takes batch 1: batch x heads query heads over batch x
// kv_heads KV heads is the same work and the same bytes (GQA maps query head h of a batch
// entry to that entry's KV head, and batch B x H heads to KV head h / group alike).
PassRun run_backward(const BackwardRun& r, const CompareProblem& p, int warmups, int repeats) {
  const cpu::Index hq = r.batch * r.heads, hkv = r.batch * r.key_value_heads();
  const auto Q = random_heads(1, hq, r.queries(), r.d, p.seed);
  const auto K = random_heads(1, hkv, r.n, r.d, p.seed + 1);
  const auto V = random_heads(1, hkv, r.n, r.d, p.seed + 2);
  const auto dO = random_heads(1, hq, r.queries(), r.d, p.seed + 3);
  const GpuBackwardRun run = run_gpu_backward(Q, K, V, dO,
                                              {.dtype = sim::parse_dtype(r.dtype),
                                               .causal = r.alignment(),
                                               .deterministic = r.deterministic,
                                               .warmups = warmups,
                                               .repeats = repeats});
  return {run.ran, run.message, run.median_ms};
}

PassRun run_decode(const DecodeRun& r, const CompareProblem& p, int warmups, int repeats) {
  const cpu::Index batch = cpu::Index(r.lengths.size()), n = r.lengths.front();
  const auto Q = random_heads(batch, r.kv_heads * r.group, r.n_q, r.d, p.seed);
  const auto K = random_heads(batch, r.kv_heads, n, r.d, p.seed + 1);
  const auto V = random_heads(batch, r.kv_heads, n, r.d, p.seed + 2);
  const GpuDecodeRun run = run_gpu_decode(Q, K, V, r.lengths,
                                          {.dtype = sim::parse_dtype(r.dtype),
                                           .page_size = r.page_size,
                                           .table_seed = p.seed,
                                           .splits = {int(r.splits)},
                                           .warmups = warmups,
                                           .repeats = repeats,
                                           .queue = r.queue});
  return {run.ran, run.message, run.ran ? run.median_ms.front() : 0};
}

// The options that make the same run again, for the --gpu-only run under ncu.
std::vector<std::string> gpu_only_command(Pass pass, const ComparePassArgs& a,
                                          const CompareProblem& p) {
  const std::string name(to_string(pass));
  std::vector<std::string> argv{fmt::format("/proc/{}/exe", getpid()),
                                "compare",
                                "--pass",
                                name,
                                "--gpu-only",
                                name,
                                "--n",
                                std::to_string(p.n),
                                "--n-q",
                                std::to_string(p.n_q),
                                "--d",
                                std::to_string(p.d),
                                "--heads",
                                std::to_string(p.heads),
                                "--kv-heads",
                                std::to_string(a.kv_heads),
                                "--batch",
                                std::to_string(a.batch),
                                "--dtype",
                                p.dtype,
                                "--seed",
                                std::to_string(p.seed)};
  if (pass == Pass::backward) {
    if (p.causal) argv.push_back("--causal");
    if (a.deterministic) argv.push_back("--deterministic");
  } else {
    argv.insert(argv.end(), {"--splits", std::to_string(a.splits), "--page-size",
                             std::to_string(a.page_size), "--grid", a.grid});
  }
  return argv;
}

// The GPU's row: the pass's median time and its measured bytes beside the prediction.
Row gpu_pass_row(Pass pass, const ComparePassArgs& a, const CompareProblem& p,
                 const GpuStatus& status, const PassPrediction& prediction,
                 const std::function<PassRun(int, int)>& run_pass) {
  const std::string name = fmt::format("GPU {}", to_string(pass));
  if (!status.available) return {name, "-", "-", "not run: " + status.description};
  std::cerr << "flashlab: running the " << to_string(pass) << " pass on the GPU...\n";
  const PassRun run = run_pass(/*warmups=*/2, p.repeats);
  if (!run.ran) return {name, "-", "-", "not run: " + run.message};
  const NcuOutcome m = measure_pass(pass, a, p);
  const std::string time = fmt::format("{:.1f} us (median of {})", run.median_ms * 1e3, p.repeats);
  const std::string kernels =
      m.bytes ? fmt::format(" ({} kernel launches)", m.bytes->kernels) : std::string();
  const auto& r = prediction.report;
  // DRAM read against the floor from a cold L2: 1 where every sector came once, more where
  // the L2 dropped lines the pass read again.
  const auto floor = compulsory_dram(prediction);
  const auto grid = a.no_grid_model ? std::nullopt : grid_dram(prediction);
  const std::string dram_ratio =
      (m.bytes && floor
           ? ", DRAM read " + ratio_text(m.bytes->dram_read, double(floor->read)) + " of the floor"
           : "") +
      (m.bytes && grid
           ? ", " + ratio_text(m.bytes->dram_read, double(grid->read)) + " of the grid model's"
           : "");
  return {name, time, "-",
          measured_text(m, r && r->bytes_written() > r->bytes_stores_issued()) + kernels,
          ratios_text(m, r ? double(r->bytes_read()) : 0, r ? double(r->bytes_stores_issued()) : 0,
                      r ? double(r->bytes_written()) : 0) +
              dram_ratio};
}

}  // namespace

void add_compare_pass_options(CLI::App* cmd, ComparePassArgs& args) {
  cmd->add_option("--pass", args.pass,
                  "forward (the default), or backward or decode: the GPU pass's mirror")
      ->capture_default_str();
  add_integer_option<cpu::Index>(cmd, "--batch", args.batch, "--pass backward or decode: sequences",
                                 1, sim::kMaxDecodeBatch);
  add_integer_option<cpu::Index>(cmd, "--kv-heads", args.kv_heads,
                                 "--pass backward or decode: KV heads, a divisor of --heads "
                                 "(0: as many)",
                                 0, kMaxHeads);
  cmd->add_flag("--deterministic", args.deterministic,
                "--pass backward: dQ by its own kernel instead of fp32 atomics");
  cmd->add_flag("--no-grid-model", args.no_grid_model,
                "--pass backward: leave out the grid model's DRAM bytes (its blocks through the "
                "L2 line by line: minutes at N >= 32768)");
  add_integer_option<cpu::Index>(
      cmd, "--splits", args.splits,
      "--pass decode: splits per cache, 1 to 1024 (0, the default: the kernel's rule)", 0,
      sim::kMaxDecodeSplits);
  add_integer_option<cpu::Index>(cmd, "--page-size", args.page_size,
                                 "--pass decode: tokens per page (0: contiguous cache)", 0,
                                 sim::kMaxDecodeLength);
  cmd->add_option("--grid", args.grid,
                  "--pass decode: splits (a block per split) or queue (persistent blocks taking "
                  "pieces from a queue; --splits is then the pieces)")
      ->check(CLI::IsMember({"splits", "queue"}))
      ->capture_default_str();
}

void check_forward_options(const CLI::App* cmd) {
  for (const std::string_view o : kPassOptions) {
    if (cmd->count(std::string(o)) == 0) continue;
    std::string where = "--pass backward or decode";  // --batch and --kv-heads: both passes
    for (const PassOption& p : kPassOnly)
      if (p.option == o) where = fmt::format("--pass {}", to_string(p.pass));
    throw cpu::InvalidArgument(
        fmt::format("{} is an option of {}, not of the forward comparison", o, where));
  }
}

// The backward's run starts with the fa2 forward that makes O and L (one kernel launch), which
// ncu skips: what it sums is the backward's kernels.
NcuOutcome measure_pass(Pass pass, const ComparePassArgs& a, const CompareProblem& p) {
  if (p.no_ncu) return {std::nullopt, "not measured (--no-ncu)"};
  const auto ncu = find_ncu();
  if (!ncu) return {std::nullopt, "unavailable: ncu (Nsight Compute) is not installed"};
  std::cerr << "flashlab: measuring the " << to_string(pass) << " pass's bytes with Nsight Compute "
            << describe(ncu_clocks()) << "...\n";
  // The backward's forward, which makes its O and LSE, is left out of the sums too.
  const int forward = pass == Pass::backward ? 1 : 0;
  NcuOutcome outcome = measure_with_ncu(*ncu, gpu_only_command(pass, a, p), forward);
  if (!outcome.bytes) outcome.message = "unavailable: " + outcome.message;
  return outcome;
}

std::optional<sim::CompulsoryDram> compulsory_dram(const PassPrediction& prediction) {
  if (!prediction.report) return std::nullopt;
  return sim::compulsory_dram(*prediction.report, sim::l2_dirty_room(target_profile()));
}

bool runs_grid_model(Pass pass, const ComparePassArgs& a) {
  return pass == Pass::backward && !a.no_grid_model;
}

std::optional<sim::CompulsoryDram> grid_dram(const PassPrediction& prediction) {
  if (!prediction.report) return std::nullopt;
  // The grid model moves every tile the blocks move through the L2's sets, line by line
  // (kGridModelBytesPerSecond): past some 8 s of it, a line says so while it runs.
  constexpr double kNoteSeconds = 8;
  if (const double bytes = double(prediction.report->bytes_read());
      bytes > kNoteSeconds * kGridModelBytesPerSecond)
    std::cerr << fmt::format(
        "flashlab: the grid model runs the pass's {} into the SMs through the L2 line by line "
        "(about {:.0f} s); --no-grid-model leaves it out\n",
        sim::format_bytes(bytes), bytes / kGridModelBytesPerSecond);
  const auto launches = sim::predicted_dram(*prediction.report, target_profile());
  if (!launches || std::none_of(launches->begin(), launches->end(),
                                [](const sim::LaunchDram& l) { return l.from_grid; }))
    return std::nullopt;
  return sim::total(*launches);
}

PassCase pass_case(Pass pass, const ComparePassArgs& a, const CompareProblem& p) {
  const cpu::Index kv_heads = kv_heads_of(a, p.heads);
  PassCase c;
  c.resolved = a;
  if (pass == Pass::backward) {
    const BackwardRun run{a.batch, p.heads,  kv_heads,       p.n, p.n_q, p.d,
                          p.dtype, p.causal, a.deterministic};
    c.header = fmt::format(
        "backward: batch {}, {} query heads over {} KV heads, N_q = {}, N_k = {}, d = {}, {}, "
        "causal = {}{}",
        run.batch, run.heads, kv_heads, run.queries(), run.n, run.d, run.dtype,
        cpu::to_string(run.alignment()), run.deterministic ? ", deterministic dQ" : "");
    c.prediction = predict(run);
    c.run = [run, p](int warmups, int repeats) { return run_backward(run, p, warmups, repeats); };
    return c;
  }
  DecodeRun run;
  run.lengths.assign(std::size_t(a.batch), p.n);
  run.kv_heads = kv_heads;
  run.group = p.heads / kv_heads;
  run.n_q = p.n_q > 0 ? p.n_q : 1;
  run.d = p.d;
  run.dtype = p.dtype;
  run.page_size = a.page_size;
  run.queue = a.grid == "queue";
  run.splits = a.splits > 0 ? a.splits : decode_splits(run, target_profile());
  c.resolved.splits = run.splits;
  c.header = fmt::format(
      "decode: batch {} caches of {} keys, {} query heads over {} KV heads, {} query row{} "
      "each, d = {}, {}, {} {}, {}",
      a.batch, p.n, p.heads, kv_heads, run.n_q, run.n_q > 1 ? "s" : "", p.d, p.dtype, run.splits,
      run.queue ? "pieces on the queue grid" : "splits",
      run.page_size > 0 ? fmt::format("pages of {}", run.page_size) : "contiguous");
  c.prediction = predict(run);
  c.run = [run, p](int warmups, int repeats) { return run_decode(run, p, warmups, repeats); };
  return c;
}

void run_compare_pass(const CLI::App* cmd, Pass pass, const ComparePassArgs& a,
                      const CompareProblem& p) {
  check_compare_pass_options(cmd, pass);
  if (!p.gpu_only.empty() && p.gpu_only != to_string(pass))
    throw cpu::InvalidArgument(fmt::format("--gpu-only {} with --pass {}: name the pass it runs",
                                           p.gpu_only, to_string(pass)));
  const PassCase c = pass_case(pass, a, p);
  // A problem the pass's kernels do not take (a dtype, a head dimension) is refused, as
  // simulate --pass refuses it: there would be nothing to compare.
  if (!c.prediction.report)
    throw cpu::InvalidArgument(fmt::format("--pass {}: {}", to_string(pass), c.prediction.why_not));
  if (p.gpu_only.empty() && runs_grid_model(pass, c.resolved))
    check_grid_model_time(double(c.prediction.report->bytes_read()), kMaxGridModelSeconds, p.large,
                          "this comparison", "N, --heads or --batch, or pass --no-grid-model");
  if (!p.gpu_only.empty()) {  // under ncu: the first kernel, then the pass once; print nothing
    run_ncu_first_kernel(fmt::format("--gpu-only {}", p.gpu_only));
    if (const PassRun run = c.run(/*warmups=*/0, /*repeats=*/1); !run.ran)
      throw std::runtime_error(
          fmt::format("--gpu-only {}: the pass did not run: {}", p.gpu_only, run.message));
    return;
  }
  std::cout << c.header << "\n";
  const GpuStatus status = gpu_status();
  std::cout << target_line() << gpu_line(status);
  Table table({"executor", "time", "bytes predicted", "bytes measured", "measured/predicted"},
              {true, true, true, true, false});
  for (const Row& r : {simulator_row(c.prediction, !c.resolved.no_grid_model),
                       gpu_pass_row(pass, c.resolved, p, status, c.prediction, c.run)})
    table.add({r.executor, r.time, r.predicted, r.measured, r.ratio});
  table.print(std::cout, Style::for_stdout(p.no_colour));
  if (c.prediction.report)
    std::cout << "\n" << sim::format_pass_table(*c.prediction.report, target_profile());
}

}  // namespace flashlab::app

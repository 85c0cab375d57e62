// `flashlab compare --pass backward|decode`: what the simulator's mirror of the GPU pass
// predicts (gpu_bridge/pass_kernels.hpp: the kernels' facts, configured in one place), each
// kernel's grid on the target GPU, and the GPU's row. The GPU runner (runner_abi.h, version
// 2) runs forward calls only; the row says so until it gains a backward and a decode entry,
// and gpu_pass_row() is where their measured time and bytes then enter.
//   flashlab compare --pass backward --n 4096 --d 128 --heads 16 --kv-heads 4 --causal
//   flashlab compare --pass decode --n 32768 --n-q 1 --d 128 --batch 8 --heads 32 --kv-heads 8
#include "compare_pass.hpp"

#include "commands.hpp"
#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "gpu_bridge/runner_abi.h"
#include "kit/terminal.hpp"

#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <array>
#include <iostream>
#include <limits>

namespace flashlab::app {

namespace {

constexpr cpu::Index kMaxHeads = 1024;

// compare's options that only its forward comparison takes, and those only one pass takes.
constexpr std::array<std::string_view, 8> kForwardOnly = {
    "--kernels", "--repeats", "--sweep", "--csv", "--plot", "--gpu-only", "--large", "--seed"};
constexpr std::array<std::string_view, 5> kPassOptions = {
    "--batch", "--kv-heads", "--deterministic", "--splits", "--page-size"};
struct PassOption {
  std::string_view option;
  Pass pass;
};
constexpr std::array kPassOnly = {
    PassOption{"--deterministic", Pass::backward}, PassOption{"--splits", Pass::decode},
    PassOption{"--page-size", Pass::decode}, PassOption{"--causal", Pass::backward}};

void check_options(const CLI::App* cmd, Pass pass) {
  for (const std::string_view o : kForwardOnly)
    if (cmd->count(std::string(o)) > 0)
      throw cpu::InvalidArgument(fmt::format(
          "{} is an option of the forward comparison, not of --pass {}", o, to_string(pass)));
  for (const PassOption& o : kPassOnly)
    if (cmd->count(std::string(o.option)) > 0 && o.pass != pass)
      throw cpu::InvalidArgument(fmt::format("{} is an option of --pass {}, not of --pass {}",
                                             o.option, to_string(o.pass), to_string(pass)));
}

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
  std::string executor, time, predicted, measured;
};

Row simulator_row(const PassPrediction& p) {
  if (!p.report) return {"simulator: " + p.label, "-", "not modelled: " + p.why_not, "-"};
  const sim::Bound b = sim::roofline(*p.report, target_profile());
  return {"simulator: " + p.label, fmt::format("model (bound {:.1f} us)", b.seconds() * 1e6),
          fmt::format("SMs read {}, write {}", bytes(double(p.report->bytes_read())),
                      bytes(double(p.report->bytes_written()))),
          "-"};
}

// The GPU's row: its time and measured bytes once the runner can call the pass.
Row gpu_pass_row(Pass pass, const GpuStatus& status) {
  const std::string name = fmt::format("GPU {}", to_string(pass));
  if (!status.available) return {name, "-", "-", "unavailable: no GPU"};
  return {name, "-", "-",
          fmt::format("not run: the GPU runner calls forward kernels only (runner ABI {})",
                      FLASHLAB_RUNNER_VERSION)};
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
  add_integer_option<cpu::Index>(
      cmd, "--splits", args.splits,
      "--pass decode: splits per cache, 1 to 1024 (default: the kernel's rule)", 1,
      sim::kMaxDecodeSplits);
  add_integer_option<cpu::Index>(cmd, "--page-size", args.page_size,
                                 "--pass decode: tokens per page (0: contiguous cache)", 0,
                                 sim::kMaxDecodeLength);
}

void check_forward_options(const CLI::App* cmd) {
  for (const std::string_view o : kPassOptions)
    if (cmd->count(std::string(o)) > 0)
      throw cpu::InvalidArgument(fmt::format(
          "{} is an option of --pass backward or decode, not of the forward comparison", o));
}

void run_compare_pass(const CLI::App* cmd, Pass pass, const ComparePassArgs& a,
                      const CompareProblem& p) {
  check_options(cmd, pass);
  const cpu::Index kv_heads = kv_heads_of(a, p.heads);
  PassPrediction prediction;
  if (pass == Pass::backward) {
    const BackwardRun run{a.batch, p.heads,  kv_heads,       p.n, p.n_q, p.d,
                          p.dtype, p.causal, a.deterministic};
    std::cout << fmt::format(
        "backward: batch {}, {} query heads over {} KV heads, N_q = {}, N_k = {}, d = {}, {}, "
        "causal = {}{}\n",
        run.batch, run.heads, kv_heads, run.queries(), run.n, run.d, run.dtype,
        cpu::to_string(run.alignment()), run.deterministic ? ", deterministic dQ" : "");
    prediction = predict(run);
  } else {
    DecodeRun run;
    run.lengths.assign(std::size_t(a.batch), p.n);
    run.kv_heads = kv_heads;
    run.group = p.heads / kv_heads;
    run.n_q = p.n_q > 0 ? p.n_q : 1;
    run.d = p.d;
    run.dtype = p.dtype;
    run.page_size = a.page_size;
    run.splits = a.splits > 0 ? a.splits : decode_splits(run, target_profile());
    std::cout << fmt::format(
        "decode: batch {} caches of {} keys, {} query heads over {} KV heads, {} query row{} "
        "each, d = {}, {}, {} splits, {}\n",
        a.batch, p.n, p.heads, kv_heads, run.n_q, run.n_q > 1 ? "s" : "", p.d, p.dtype, run.splits,
        run.page_size > 0 ? fmt::format("pages of {}", run.page_size) : "contiguous");
    prediction = predict(run);
  }
  const GpuStatus status = gpu_status();
  std::cout << "GPU: " << status.description << "\n";
  Table table({"executor", "time", "bytes predicted", "bytes measured"}, {true, true, true, true});
  for (const Row& r : {simulator_row(prediction), gpu_pass_row(pass, status)})
    table.add({r.executor, r.time, r.predicted, r.measured});
  table.print(std::cout, Style::for_stdout(p.no_colour));
  if (prediction.report)
    std::cout << "\n" << sim::format_pass_table(*prediction.report, target_profile());
}

}  // namespace flashlab::app

// `flashlab compare`: the same inputs through the CPU reference, the simulator and (where
// present) the GPU kernels, side by side: max error against fp64, time, the bytes the
// simulator's mirror of each kernel predicts, and the bytes Nsight Compute measures (when
// ncu is available). With --sweep, the bytes alone over a grid of N, d and heads
// (compare_sweep.cpp). With --pass backward or decode, the GPU pass's mirror and the GPU's
// row instead (compare_pass.cpp).
#include "commands.hpp"
#include "compare_pass.hpp"
#include "compare_pass_sweep.hpp"
#include "compare_sweep.hpp"
#include "kernel_bytes.hpp"
#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/ncu_bytes.hpp"
#include "kit/terminal.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/correctness.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/sim/limits.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <stdexcept>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include <unistd.h>

namespace flashlab::app {

namespace {

constexpr int kMaxRepeats = 1000;
// Everything on the CPU side is computed in full: fp64 attention and the naive attention in
// the input's precision each hold S and P, (N_q, N_k) each, and the tiled forward runs once
// per repeat. Beyond this many multiply-adds (N_q N_k d per pass; 4096 x 4096 x 128 with the
// default 10 repeats and the 2 reference passes), the run takes minutes on a small machine.
constexpr double kMaxMultiplyAdds = 4096.0 * 4096.0 * 128.0 * 12.0;
// fp64 S and P, and S and P in the input's precision, at most 4 bytes an entry there.
constexpr double kReferenceBytesPerEntry = 2 * 8 + 2 * 4;
constexpr double kMaxReferenceBytes = 4.0 * (1ull << 30);

struct CompareArgs {
  Index n = 1024, n_q = 0, d = 64, heads = 1;
  bool causal = false, large = false;
  std::string dtype = "bf16", kernels = kernel_list(), gpu_only;
  std::uint64_t seed = 0;
  int repeats = 10;
  bool no_ncu = false, no_colour = false;
  std::vector<std::string> sweep;  // "n=1024..65536", "d=64,128", "heads=1,16"
  std::string csv, plot, profile, ncu_clocks = "own";
  std::int32_t fa3_kv_l2_share = FLASHLAB_FA3_AUTO;  // --fa3-kv-l2-share
  ComparePassArgs pass;
  CLI::App* cmd = nullptr;
};

KernelRun run_of(const CompareArgs& a, const std::string& kernel) {
  KernelRun run{kernel, a.n, a.n_q, a.d, a.heads, a.dtype, a.causal, a.seed};
  run.fa3_kv_l2_share = a.fa3_kv_l2_share;  // fa3's order's alone; the other kernels ignore it
  return run;
}

struct Inputs {
  cpu::Matrix<float> Q, K, V;   // (N_q, d), (N, d), (N, d), already rounded to the dtype
  cpu::Matrix<double> O_exact;  // fp64 attention of those same numbers
  cpu::AttentionOptions options;
};

template <class In>
cpu::Matrix<float> rounded(const cpu::Matrix<float>& X) {
  return X.cast<In>().template cast<float>();
}

// Random inputs rounded to the dtype; O_exact is left for compare() to fill.
Inputs make_inputs(const CompareArgs& a, sim::DType dtype) {
  const Index n_q = a.n_q > 0 ? a.n_q : a.n;
  const auto kv = random_inputs({.N = a.n, .d = a.d, .seed = a.seed});
  const auto q = random_inputs({.N = n_q, .d = a.d, .seed = a.seed + 1});
  const auto round = [&](const cpu::Matrix<float>& X) {
    return dtype == sim::DType::bf16   ? rounded<cpu::bf16>(X)
           : dtype == sim::DType::fp16 ? rounded<cpu::fp16>(X)
                                       : X;
  };
  Inputs in{round(q.Q), round(kv.K), round(kv.V), {}, {}};
  in.options.causal = run_of(a, "").alignment();
  return in;
}

cpu::Matrix<double> exact_attention(const Inputs& in) {
  return cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(), in.V.cast<double>(),
                                      in.options)
      .O;
}

double max_error(const cpu::Matrix<float>& O, const cpu::Matrix<double>& exact) {
  return (O.cast<double>() - exact).cwiseAbs().maxCoeff();
}

template <class F>
double median_ms(int repeats, F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class In>
std::pair<cpu::Matrix<float>, double> cpu_run(const Inputs& in, int repeats) {
  const cpu::Matrix<In> Q = in.Q.cast<In>(), K = in.K.cast<In>(), V = in.V.cast<In>();
  cpu::Matrix<float> O;
  const double ms = median_ms(
      repeats, [&] { O = cpu::forward_q_outer<In>(Q, K, V, in.options).O.template cast<float>(); });
  return {O, ms};
}

template <class In>
cpu::Matrix<float> naive_same_precision(const Inputs& in) {
  return cpu::naive_attention<In>(in.Q.cast<In>(), in.K.cast<In>(), in.V.cast<In>(), in.options)
      .O.template cast<float>();
}

struct Row {
  std::string executor, error, time, predicted, measured, ratio = "-";
};

std::string us(double ms) { return fmt::format("{:.1f} us", ms * 1e3); }
std::string bytes_text(double b) { return sim::format_bytes(b); }

// The bound of the whole run: fa3's mirror counts every head; the others' one head, times
// the heads.
std::string bound_of(const Prediction& p) {
  if (!p.modelled()) return "";
  const double seconds =
      p.pass ? sim::roofline(*p.pass, target_profile()).seconds()
             : sim::roofline(*p.report, target_profile()).seconds() * double(p.heads);
  return fmt::format(" (bound {})", us(seconds * 1e3));
}

// The comma-separated names of a list, empty ones included ("fa2," is "fa2" and ""), so that
// check_kernels sees a name missing anywhere; "" is no name at all.
std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream s(list);
  for (std::string item; std::getline(s, item, ',');) out.push_back(item);
  if (!list.empty() && list.back() == ',') out.emplace_back();
  return out;
}

using Errors = std::vector<std::pair<std::string, double>>;

void simulator_rows(const std::vector<Prediction>& predictions, std::vector<Row>& rows) {
  for (const auto& p : predictions)
    rows.push_back({"simulator: " + p.label, "-", p.modelled() ? "model" + bound_of(p) : "-",
                    predicted_text(p), "-"});
}

void gpu_rows(const CompareArgs& a, sim::DType dtype, const Inputs& in,
              const std::vector<Prediction>& predictions, std::vector<Row>& rows, Errors& errors) {
  const GpuStatus status = gpu_status();
  std::cout << target_line() << gpu_line(status);
  for (const auto& p : predictions) {
    const std::string& kernel = p.kernel;
    const std::string name = "GPU " + kernel;
    if (!status.available) {
      rows.push_back({name, "not run", "-", "-", "unavailable: no GPU"});
      continue;
    }
    std::cerr << "flashlab: running the " << kernel << " kernel...\n";
    const GpuRun run = run_gpu_forward(kernel, in.Q, in.K, in.V, dtype, in.options.causal,
                                       /*warmups=*/2, a.repeats, a.heads, a.fa3_kv_l2_share);
    if (!run.ran) {
      rows.push_back({name, "not run: " + run.message, "-", "-", "-"});
      continue;
    }
    const double err = max_error(run.O, in.O_exact);
    errors.emplace_back(name, err);
    const NcuOutcome m = measure(run_of(a, kernel), a.no_ncu);
    rows.push_back({name, num(err, 3), us(run.median_ms), predicted_text(p),
                    measured_text(m, p.sm_written() > p.sm_stores_issued()),
                    ratios_text(m, p.sm_read(), p.sm_stores_issued(), p.sm_written())});
  }
}

// The correctness rule (flashlab/cpu/correctness.hpp): 2 x the naive error, and in fp32 a
// summation order's slack over the N_k keys of up to max|V| as well.
void print_verdicts(const Style& style, sim::DType dtype, double naive_err, const Inputs& in,
                    const Errors& errors) {
  const double slack =
      dtype == sim::DType::fp32
          ? cpu::summation_order_slack(double(in.K.rows()), double(in.V.cwiseAbs().maxCoeff()))
          : 0.0;
  const double bound = cpu::kOutputErrorFactor * naive_err + slack;
  std::cout << fmt::format(
      "\nThe correctness rule (ANCHORS.md): error <= {} x the naive {} error{} = {}\n",
      cpu::kOutputErrorFactor, sim::to_string(dtype),
      slack > 0 ? fmt::format(" + fp32's summation-order slack {}", num(slack, 3)) : "",
      num(bound, 3));
  for (const auto& [who, err] : errors) {
    const bool within = err <= bound;
    std::cout << "  " << who << ": "
              << (within ? paint(style, Tone::good, "within") : paint(style, Tone::bad, "OUTSIDE"))
              << "\n";
  }
}

template <class In>
void compare(const CompareArgs& a, sim::DType dtype) {
  Inputs in = make_inputs(a, dtype);
  in.O_exact = exact_attention(in);
  std::cout << fmt::format(
      "N_q = {}, N_k = {}, d = {}, {} head{}, {}, causal = {}, seed {}; errors are max\n"
      "|O - O_fp64| of head 0 against fp64 attention of the same (rounded) inputs.\n",
      in.Q.rows(), in.K.rows(), a.d, a.heads, a.heads > 1 ? "s" : "", a.dtype,
      cpu::to_string(in.options.causal), a.seed);
  std::vector<Row> rows;
  Errors errors;
  const double naive_err = max_error(naive_same_precision<In>(in), in.O_exact);
  rows.push_back(
      {fmt::format("CPU naive, {} (three operators)", a.dtype), num(naive_err, 3), "-", "-", "-"});
  const auto [O_cpu, cpu_ms] = cpu_run<In>(in, a.repeats);
  errors.emplace_back("CPU tiled", max_error(O_cpu, in.O_exact));
  rows.push_back({"CPU tiled (FA2 order)", num(errors.back().second, 3),
                  fmt::format("{:.2f} ms", cpu_ms), "-", "- (host memory)"});
  std::vector<Prediction> predictions;
  for (const auto& kernel : split(a.kernels)) predictions.push_back(predict(run_of(a, kernel)));
  simulator_rows(predictions, rows);
  gpu_rows(a, dtype, in, predictions, rows, errors);
  Table table(
      {"executor", "max error", "time", "bytes predicted", "bytes measured", "measured/predicted"},
      {true, true, true, true, true, false});
  for (const auto& r : rows)
    table.add({r.executor, r.error, r.time, r.predicted, r.measured, r.ratio});
  const Style style = Style::for_stdout(a.no_colour);
  table.print(std::cout, style);
  print_verdicts(style, dtype, naive_err, in, errors);
  std::cout << fmt::format(
      "Predicted bytes: the simulator's count of what crosses between the L2 and the SMs\n"
      "(measured by l1tex__m_xbar2l1tex_read_bytes; writes by the store and reduction sectors\n"
      "the L1 issued, l1tex__t_sectors_pipe_lsu_mem_global_op_st + _red, x 32 B) and of\n"
      "what reaches DRAM past a {} L2 (dram__bytes_read/write): for fa2, fa3 and the scalar\n"
      "kernel their whole grid ({} SMs, blocks in waves{}, fa3's in its scheduler's order,\n"
      "each on the partition the GPU's block scheduler puts it where the profile has measured it)\n"
      "through the L2's {} partitions (replacement: {}{}), K and V held in each,\n"
      "the DRAM writes those made while it ran and apart what it leaves dirty; for the naive\n"
      "kernel its three launches, each from an empty L2, through the whole L2's room shared\n"
      "by the heads (the same lines, home copies, and what the L2 holds dirty capped as\n"
      "measured), its softmax's blocks out of step.\n"
      "lts__t_bytes, at the L2 slices, sits lower: Hopper's L2 Request Coalescer merges the\n"
      "requests of several SMs for the same sectors that meet in it (SM reads per slice read:\n"
      "lrc__xbar2gpc_sectors_op_read over lrc__lts2lrc_sectors_op_read, a matter of timing\n"
      "that the model, having no clock, does not predict). Writes are booked as the 32-byte\n"
      "sectors each warp store touches; what left the SMs (l1tex__m_l1tex2xbar_write_bytes)\n"
      "is those or fewer: whole sectors (fa2's O, fa3's through TMA) leave as issued; partly\n"
      "written ones may be merged after the L1's store pipe, by a rule the model does not\n"
      "know (docs/IO-LEVELS.md).\n",
      bytes_text(double(target_profile().l2_bytes)), target_profile().sm_count,
      target_profile().older_block_lead > 0
          ? fmt::format(" (fa2's older block on an SM {:.0f}% ahead of the\nyounger, as the "
                        "profile measured; the scalar kernel's in step)",
                        100 * target_profile().older_block_lead)
          : "",
      target_profile().l2_partitions, sim::to_string(target_profile().l2_replacement),
      target_profile().l2_home_copies
          ? "; each line read from DRAM\nor written held at its home partition too: home copies"
          : "");
}

template <class In>
void gpu_only(const CompareArgs& a, sim::DType dtype) {
  const Inputs in = make_inputs(a, dtype);
  run_ncu_first_kernel(fmt::format("--gpu-only {}", a.gpu_only));
  const GpuRun run = run_gpu_forward(a.gpu_only, in.Q, in.K, in.V, dtype, in.options.causal,
                                     /*warmups=*/0, /*repeats=*/1, a.heads, a.fa3_kv_l2_share);
  // Under ncu a kernel that did not run would leave nothing to measure and no word why.
  if (!run.ran)
    throw std::runtime_error(
        fmt::format("--gpu-only {}: the kernel did not run: {}", a.gpu_only, run.message));
}

// What the CPU side of the comparison will cost, checked before anything is allocated.
void check_cost(const CompareArgs& a) {
  const double n_q = double(a.n_q > 0 ? a.n_q : a.n), entries = n_q * double(a.n);
  const double multiply_adds = entries * double(a.d) * (a.repeats + 2);
  const double bytes = entries * kReferenceBytesPerEntry;
  if (bytes > kMaxReferenceBytes)
    throw cpu::InvalidArgument(fmt::format(
        "compare computes N_q x N_k = {:.0f} attention scores exactly on this CPU, which needs "
        "about "
        "{} of memory, more than the {} it allows; use a smaller N or N_q (8192 x 8192 fits)",
        entries, bytes_text(bytes), bytes_text(kMaxReferenceBytes)));
  if (multiply_adds > kMaxMultiplyAdds && !a.large)
    throw cpu::InvalidArgument(fmt::format(
        "compare would do {:.3g} multiply-adds on this CPU (N_q N_k d x (repeats + 2)), above the "
        "{:.3g} that finish in about a minute; pass --large to run it anyway, or lower N, d or "
        "--repeats",
        multiply_adds, kMaxMultiplyAdds));
  double grid_bytes = 0;
  for (const auto& kernel : split(a.kernels)) grid_bytes += grid_model_bytes(run_of(a, kernel));
  check_grid_model_time(grid_bytes, kMaxGridModelSeconds, a.large, "this comparison",
                        "N or --heads");
}

// Every name in --kernels is a kernel of the ladder, named once.
void check_kernels(const CompareArgs& a) {
  const auto names = split(a.kernels);
  if (names.empty())
    throw cpu::InvalidArgument("--kernels is empty: give one or more of " + kernel_list());
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (names[k].empty())
      throw cpu::InvalidArgument(
          fmt::format("--kernels {}: a name is missing {}; give one or more of {}", a.kernels,
                      k == 0                  ? "before the first comma"
                      : k + 1 == names.size() ? "after the last comma"
                                              : "between two commas",
                      kernel_list()));
    if (!kernel_by_name(names[k]))
      throw cpu::InvalidArgument("--kernels: " + unknown_kernel_message(names[k]));
    if (std::find(names.begin(), names.begin() + std::ptrdiff_t(k), names[k]) !=
        names.begin() + std::ptrdiff_t(k))
      throw cpu::InvalidArgument(
          fmt::format("--kernels names {} twice: name each kernel once", names[k]));
  }
}

// The GPU the predictions are for: --profile's, else the device compare runs on where it is
// one of the targets (target_of_device), else the H200 (target_profile()).
void choose_target(const CompareArgs& a) {
  if (!a.profile.empty()) return set_target_profile(a.profile);
  if (!a.gpu_only.empty()) return;  // the run under Nsight Compute predicts nothing
  const GpuStatus status = gpu_status();
  const std::string_view device = target_of_device(status.description);
  if (status.available && !device.empty()) set_target_profile(device);
}

// An option that a sweep's axis also sets would be silently overridden at every point.
void check_sweep_overrides(const CompareArgs& a) {
  for (const std::string& item : a.sweep) {
    const std::string axis = item.substr(0, item.find('='));
    const std::string option = axis == "n"       ? "--n"
                               : axis == "d"     ? "--d"
                               : axis == "heads" ? "--heads"
                               : axis == "batch" ? "--batch"
                                                 : "";
    if (!option.empty() && a.cmd->count(option) > 0)
      throw cpu::InvalidArgument(
          fmt::format("{} with --sweep {}: the sweep sets {} at every point; give one of the two",
                      option, item, axis));
  }
}

void run(const CompareArgs& a) {
  check_sweep_overrides(a);
  if (a.sweep.empty() && (!a.csv.empty() || !a.plot.empty()))
    throw cpu::InvalidArgument(
        "--csv and --plot write a sweep's rows: give --sweep n=... with them");
  if (!a.sweep.empty() && !a.gpu_only.empty())
    throw cpu::InvalidArgument("--gpu-only runs one problem: give it without --sweep");
  if (!a.sweep.empty() && a.causal &&
      std::any_of(a.sweep.begin(), a.sweep.end(),
                  [](const std::string& item) { return item.starts_with("causal="); }))
    throw cpu::InvalidArgument(
        "--causal with --sweep causal=...: the sweep's axis says which masks run; give one of "
        "the two");
  choose_target(a);
  set_ncu_clocks(*parse_ncu_clocks(a.ncu_clocks));  // CLI11 took only its names
  if (const Pass pass = parse_pass(a.pass.pass, /*takes_fa3=*/false); pass != Pass::forward) {
    const CompareProblem problem{a.n,         a.n_q,  a.d,       a.heads,  a.dtype,    a.causal,
                                 a.no_colour, a.seed, a.repeats, a.no_ncu, a.gpu_only, a.large};
    if (a.sweep.empty()) return run_compare_pass(a.cmd, pass, a.pass, problem);
    check_compare_pass_options(a.cmd, pass);
    return run_compare_pass_sweep(
        {pass, a.pass, problem,
         parse_sweep(
             a.sweep, {{a.n}, {a.d}, {a.heads}, {a.pass.batch}, {a.causal}},
             {.batch = true, .causal = pass == Pass::backward, .max_batch = sim::kMaxDecodeBatch}),
         a.csv, a.plot});
  }
  check_forward_options(a.cmd);
  check_kernels(a);
  if (!a.sweep.empty() && a.n_q > 0)
    throw cpu::InvalidArgument(
        "--n-q with --sweep: the forward sweep runs as many queries as keys at every point; give "
        "--n-q to a single comparison (or to --pass backward --sweep, which keeps it)");
  if (!a.sweep.empty()) {
    const KernelRun base = run_of(a, "");
    return run_compare_sweep(
        {base, split(a.kernels),
         parse_sweep(a.sweep, {{base.n}, {base.d}, {base.heads}, {1}, {base.causal}}), a.no_ncu,
         a.no_colour, a.csv, a.plot, a.large});
  }
  if (a.gpu_only.empty()) check_cost(a);  // --gpu-only computes nothing on the CPU
  const sim::DType dtype = sim::parse_dtype(a.dtype);
  const auto go = [&](auto tag) {
    using In = decltype(tag);
    a.gpu_only.empty() ? compare<In>(a, dtype) : gpu_only<In>(a, dtype);
  };
  if (dtype == sim::DType::bf16)
    go(cpu::bf16{});
  else if (dtype == sim::DType::fp16)
    go(cpu::fp16{});
  else
    go(float{});
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare", "CPU reference, simulator and GPU on the same inputs: error, time, bytes");
  auto& args = arguments_of<CompareArgs>(cmd, run);
  args.cmd = cmd;
  add_integer_option<Index>(cmd, "--n", args.n, "Keys N (and queries, unless --n-q)", 1,
                            sim::kMaxLength);
  add_integer_option<Index>(cmd, "--n-q", args.n_q, "Query rows N_q (1 for decode); 0 means N", 0,
                            sim::kMaxLength);
  add_integer_option<Index>(cmd, "--d", args.d, "Head dimension d", 1, sim::kMaxHeadDim);
  cmd->add_flag("--causal", args.causal, "Causal mask (bottom-right aligned when N_q != N)");
  cmd->add_option("--dtype", args.dtype, "fp32, bf16 or fp16")->capture_default_str();
  add_integer_option<std::uint64_t>(cmd, "--seed", args.seed, "Seed of the random inputs", 0);
  cmd->add_option("--kernels", args.kernels, "GPU kernels to run, comma-separated")
      ->capture_default_str();
  add_integer_option(cmd, "--repeats", args.repeats, "Timed runs; the median is shown", 1,
                     kMaxRepeats);
  cmd->add_flag("--no-ncu", args.no_ncu, "Do not measure bytes with Nsight Compute");
  cmd->add_option("--ncu-clocks", args.ncu_clocks,
                  "The clocks Nsight Compute measures at: own (the card's, as a program runs) "
                  "or base (locked at its base clock; the GQA backward reads apart at the two)")
      ->capture_default_str()
      ->check(CLI::IsMember({"own", "base"}));
  add_no_color_flag(cmd, args.no_colour);
  cmd->add_flag("--large", args.large,
                "Run a problem above the CPU-time limit or the grid models' time limit anyway");
  add_integer_option<Index>(cmd, "--heads", args.heads,
                            "Heads (batch 1), each a copy in memory of its own", 1, kMaxHeads);
  cmd->add_option("--sweep", args.sweep,
                  "Bytes alone over a grid, repeatable: n=1024..65536, d=64,128, heads=1,16, "
                  "causal=no,yes (and with --pass, batch=1,8; decode has no mask)");
  cmd->add_option("--csv", args.csv, "With --sweep: write the rows as CSV");
  cmd->add_option("--plot", args.plot,
                  "With --sweep over n: draw bytes against N, predicted and measured, a panel per "
                  "level (into and out of the SMs, DRAM read and written; PNG, gnuplot)");
  cmd->add_option(
      "--profile", args.profile,
      "The GPU the predictions are for: " + fmt::format("{}", fmt::join(target_names(), " or ")) +
          " (default: the GPU compare runs on, where it is one of them; else " +
          std::string(kDefaultTarget) + ")");
  add_integer_option<std::int32_t>(
      cmd, "--fa3-kv-l2-share", args.fa3_kv_l2_share,
      "fa3's tile order: plan its sections' K and V on this percent of the L2 (the kernel's "
      "flashlab_fa3_options.kv_l2_share; default: the kernel's own, fa3::auto_kv_l2_share)",
      1, gpu::fa3::kMaxKvL2Share)
      ->default_str("auto");
  add_compare_pass_options(cmd, args.pass);
  cmd->add_option(
         "--gpu-only", args.gpu_only,
         "Run one GPU kernel (or, with --pass, that pass) once and print nothing (used under ncu)")
      ->group("");
}

}  // namespace flashlab::app

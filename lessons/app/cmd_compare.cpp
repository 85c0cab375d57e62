// `flashlab compare`: the same inputs through the CPU reference, the simulator and (where
// present) the GPU kernels, side by side: max error against fp64, time, the bytes the
// simulator predicts, and the bytes Nsight Compute measures (when ncu is available).
#include "commands.hpp"
#include "gpu_runner.hpp"
#include "ncu_bytes.hpp"
#include "terminal.hpp"
#include "tile_trace.hpp"

#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <unistd.h>
#include <iostream>

namespace flashlab::app {

namespace {

struct CompareArgs {
  Index n = 1024, n_q = 0, d = 64;
  bool causal = false;
  std::string dtype = "bf16", kernels = "naive,scalar,fa2", gpu_only;
  std::uint64_t seed = 0;
  int repeats = 10;
  bool no_ncu = false, no_colour = false;
};

struct Inputs {
  cpu::Matrix<float> Q, K, V;       // (N_q, d), (N, d), (N, d), already rounded to the dtype
  cpu::Matrix<double> O_exact;      // fp64 attention of those same numbers
  cpu::AttentionOptions options;
};

// The flashlab.h causal value for the options (none, top-left, bottom-right).
int causal_code(cpu::Causal c) { return c == cpu::Causal::none ? 0 : c == cpu::Causal::top_left ? 1 : 2; }

template <class In>
cpu::Matrix<float> rounded(const cpu::Matrix<float>& X) { return X.cast<In>().template cast<float>(); }

Inputs make_inputs(const CompareArgs& a, sim::DType dtype) {
  const Index n_q = a.n_q > 0 ? a.n_q : a.n;
  const auto kv = random_inputs({.N = a.n, .d = a.d, .seed = a.seed});
  const auto q = random_inputs({.N = n_q, .d = a.d, .seed = a.seed + 1});
  const auto round = [&](const cpu::Matrix<float>& X) {
    return dtype == sim::DType::bf16 ? rounded<cpu::bf16>(X)
           : dtype == sim::DType::fp16 ? rounded<cpu::fp16>(X) : X;
  };
  Inputs in{round(q.Q), round(kv.K), round(kv.V), {}, {}};
  // With N_q != N, a causal mask must say how queries align with keys: a cache needs the last
  // query to see every key (bottom-right).
  in.options.causal = !a.causal ? cpu::Causal::none
                      : n_q == a.n ? cpu::Causal::top_left : cpu::Causal::bottom_right;
  in.O_exact = cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(),
                                            in.V.cast<double>(), in.options).O;
  return in;
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
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class In>
std::pair<cpu::Matrix<float>, double> cpu_run(const Inputs& in, int repeats) {
  const cpu::Matrix<In> Q = in.Q.cast<In>(), K = in.K.cast<In>(), V = in.V.cast<In>();
  cpu::Matrix<float> O;
  const double ms = median_ms(repeats, [&] {
    O = cpu::forward_q_outer<In>(Q, K, V, in.options).O.template cast<float>();
  });
  return {O, ms};
}

template <class In>
cpu::Matrix<float> naive_same_precision(const Inputs& in) {
  return cpu::naive_attention<In>(in.Q.cast<In>(), in.K.cast<In>(), in.V.cast<In>(), in.options)
      .O.template cast<float>();
}

struct Row {
  std::string executor, error, time, predicted, measured;
};

std::string us(double ms) { return fmt::format("{:.1f} us", ms * 1e3); }
std::string bytes(double b) { return sim::format_bytes(b); }

// The FA2 kernel's tiles (gpu/kernels/03_fa2.cu): Br = 128; Bc = 128 for d = 64, else 64.
cpu::TileSizes fa2_kernel_tiles(Index d) { return {128, d == 64 ? 128 : 64}; }

constexpr sim::Bytes kH200L2 = sim::Bytes{60} << 20;  // the H200's L2 (ANCHORS.md)

// The simulator's count for one head on one SM's SRAM, with the H200's L2 in front of HBM.
std::optional<sim::Report> simulated(sim::Algorithm a, const CompareArgs& args, sim::DType dtype,
                                     const Inputs& in, std::optional<cpu::TileSizes> tiles) {
  if (in.Q.rows() != in.K.rows()) return std::nullopt;  // the simulator takes N_q = N_k
  const sim::Problem p{.N = args.n, .d = args.d, .dtype = dtype, .causal = in.options.causal,
                       .sram_bytes = sim::find_profile("h200").sram_per_sm, .tiles = tiles,
                       .l2_bytes = kH200L2};
  return sim::count(a, p);
}

// "L2-level traffic; DRAM past the L2", as the simulator predicts them.
std::string predicted_bytes(const sim::Report& r) {
  return fmt::format("{} to SMs; DRAM {}", sim::format_bytes(double(r.bytes_total())),
                     sim::format_bytes(double(r.dram_total())));
}

std::string bound_of(const std::optional<sim::Report>& r) {
  if (!r) return "";
  return fmt::format(" (bound {})", us(sim::roofline(*r, sim::find_profile("h200")).seconds() * 1e3));
}

}  // namespace

namespace {

std::string ncu_command(const CompareArgs& a, const std::string& kernel) {
  return fmt::format("/proc/{}/exe compare --gpu-only {} --n {} --n-q {} --d {} --dtype {} --seed {}{}",
                     getpid(), kernel, a.n, a.n_q, a.d, a.dtype, a.seed, a.causal ? " --causal" : "");
}

std::string measured(const CompareArgs& a, const std::string& kernel, const GpuRun& run) {
  if (!run.ran) return "unavailable: the kernel did not run";
  if (a.no_ncu) return "not measured (--no-ncu)";
  const auto ncu = find_ncu();
  if (!ncu) return "unavailable: ncu (Nsight Compute) is not installed";
  std::cerr << "flashlab: measuring the " << kernel << " kernel's bytes with Nsight Compute...\n";
  const auto outcome = measure_with_ncu(*ncu, ncu_command(a, kernel));
  if (!outcome.bytes) return "unavailable: " + outcome.message;
  const auto& m = *outcome.bytes;
  return fmt::format("DRAM {} read, {} written; L2 {}", bytes(m.dram_read), bytes(m.dram_written),
                     bytes(m.l2));
}

GpuDtype gpu_dtype(sim::DType t) {
  return t == sim::DType::bf16 ? GpuDtype::bf16 : t == sim::DType::fp16 ? GpuDtype::fp16 : GpuDtype::fp32;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream s(list);
  for (std::string item; std::getline(s, item, ',');) out.push_back(item);
  return out;
}

void gpu_rows(const CompareArgs& a, sim::DType dtype, const Inputs& in, std::vector<Row>& rows,
              std::vector<std::pair<std::string, double>>& errors) {
  const GpuStatus status = gpu_status();
  std::cout << "GPU: " << status.description << "\n";
  for (const auto& kernel : split(a.kernels)) {
    const std::string name = "GPU " + kernel;
    if (!status.available) {
      rows.push_back({name, "not run", "-", "-", "unavailable: no GPU"});
      continue;
    }
    std::cerr << "flashlab: running the " << kernel << " kernel...\n";
    const GpuRun run = run_gpu_forward(kernel, in.Q, in.K, in.V, gpu_dtype(dtype),
                                       causal_code(in.options.causal), /*warmups=*/2, a.repeats);
    const auto predicted = kernel == "naive" ? simulated(sim::Algorithm::naive, a, dtype, in, std::nullopt)
                           : kernel == "fa2" ? simulated(sim::Algorithm::fa2, a, dtype, in, fa2_kernel_tiles(a.d))
                                             : std::nullopt;
    if (!run.ran) {
      rows.push_back({name, "not run: " + run.message, "-", "-", "-"});
      continue;
    }
    const double err = max_error(run.O, in.O_exact);
    errors.emplace_back(name, err);
    rows.push_back({name, num(err, 3), us(run.median_ms),
                    predicted ? predicted_bytes(*predicted) : "not modelled",
                    measured(a, kernel, run)});
  }
}

template <class In>
void compare(const CompareArgs& a, sim::DType dtype) {
  const Inputs in = make_inputs(a, dtype);
  std::cout << fmt::format("N_q = {}, N_k = {}, d = {}, {}, causal = {}, seed {}; errors are max |O - O_fp64|\n"
                           "against fp64 attention of the same (rounded) inputs.\n",
                           in.Q.rows(), in.K.rows(), a.d, a.dtype, cpu::to_string(in.options.causal), a.seed);
  std::vector<Row> rows;
  std::vector<std::pair<std::string, double>> errors;
  const double naive_err = max_error(naive_same_precision<In>(in), in.O_exact);
  rows.push_back({fmt::format("CPU naive, {} (three operators)", a.dtype), num(naive_err, 3), "-", "-", "-"});
  const auto [O_cpu, cpu_ms] = cpu_run<In>(in, a.repeats);
  errors.emplace_back("CPU tiled", max_error(O_cpu, in.O_exact));
  rows.push_back({"CPU tiled (FA2 order)", num(errors.back().second, 3), fmt::format("{:.2f} ms", cpu_ms),
                  "-", "- (host memory)"});
  const auto sim_naive = simulated(sim::Algorithm::naive, a, dtype, in, std::nullopt);
  const auto sim_fa2 = simulated(sim::Algorithm::fa2, a, dtype, in, fa2_kernel_tiles(a.d));
  const std::string no_sim = "not modelled (the simulator takes N_q = N_k)";
  rows.push_back({"simulator naive", "-", "model" + bound_of(sim_naive),
                  sim_naive ? predicted_bytes(*sim_naive) : no_sim, "-"});
  const auto t = fa2_kernel_tiles(a.d);
  rows.push_back({fmt::format("simulator fa2 (Br {}, Bc {})", t.Br, t.Bc), "-", "model" + bound_of(sim_fa2),
                  sim_fa2 ? predicted_bytes(*sim_fa2) : no_sim, "-"});
  gpu_rows(a, dtype, in, rows, errors);
  Table table({"executor", "max error", "time", "HBM bytes predicted", "bytes measured"},
              {true, true, true, true, true});
  for (const auto& r : rows) table.add({r.executor, r.error, r.time, r.predicted, r.measured});
  const Style style = Style::for_stdout(a.no_colour);
  table.print(std::cout, style);
  std::cout << fmt::format("\nThe correctness rule (ANCHORS.md): error <= 2 x the naive {} error = {}\n",
                           a.dtype, num(2 * naive_err, 3));
  for (const auto& [who, err] : errors)
    std::cout << "  " << who << ": "
              << (err <= 2 * naive_err ? paint(style, Tone::good, "within") : paint(style, Tone::bad, "OUTSIDE"))
              << "\n";
  std::cout << "Predicted bytes: the simulator's count of what crosses into the SM (comparable\n"
               "with ncu's L2 traffic) and of what reaches DRAM past a 60 MiB LRU L2 (comparable\n"
               "with ncu's DRAM bytes). One head on one SM: the GPU runs many blocks at once.\n";
}

template <class In>
void gpu_only(const CompareArgs& a, sim::DType dtype) {
  const Inputs in = make_inputs(a, dtype);
  run_gpu_forward(a.gpu_only, in.Q, in.K, in.V, gpu_dtype(dtype), causal_code(in.options.causal),
                  /*warmups=*/0, /*repeats=*/1);
}

void check_args(const CompareArgs& a) {
  if (a.n < 1 || a.d < 1 || a.n_q < 0 || a.repeats < 1)
    throw cpu::InvalidArgument(fmt::format(
        "compare needs N >= 1, d >= 1, N_q >= 0 (0: N_q = N) and at least one repeat; got N = {}, "
        "d = {}, N_q = {}, repeats = {}", a.n, a.d, a.n_q, a.repeats));
}

void run(const CompareArgs& a) {
  check_args(a);
  const sim::DType dtype = sim::parse_dtype(a.dtype);
  const auto go = [&](auto tag) {
    using In = decltype(tag);
    a.gpu_only.empty() ? compare<In>(a, dtype) : gpu_only<In>(a, dtype);
  };
  if (dtype == sim::DType::bf16) go(cpu::bf16{});
  else if (dtype == sim::DType::fp16) go(cpu::fp16{});
  else go(float{});
}

}  // namespace

void add_compare_command(CLI::App& app) {
  static CompareArgs args;
  auto* cmd = app.add_subcommand(
      "compare", "CPU reference, simulator and GPU on the same inputs: error, time, bytes");
  cmd->add_option("--n", args.n, "Keys N (and queries, unless --n-q)")->capture_default_str();
  cmd->add_option("--n-q", args.n_q, "Query rows N_q (1 for decode); 0 means N")->capture_default_str();
  cmd->add_option("--d", args.d, "Head dimension d")->capture_default_str();
  cmd->add_flag("--causal", args.causal, "Causal mask (bottom-right aligned when N_q != N)");
  cmd->add_option("--dtype", args.dtype, "fp32, bf16 or fp16")->capture_default_str();
  cmd->add_option("--seed", args.seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_option("--kernels", args.kernels, "GPU kernels to run, comma-separated")->capture_default_str();
  cmd->add_option("--repeats", args.repeats, "Timed runs; the median is shown")->capture_default_str();
  cmd->add_flag("--no-ncu", args.no_ncu, "Do not measure bytes with Nsight Compute");
  cmd->add_flag("--no-color", args.no_colour, "Plain text even on a terminal");
  cmd->add_option("--gpu-only", args.gpu_only, "Run one GPU kernel once and print nothing (used under ncu)")
      ->group("");
  cmd->callback([] { run(args); });
}

}  // namespace flashlab::app

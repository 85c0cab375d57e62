#include "kernel_bytes.hpp"

#include "gpu_bridge/kernels.hpp"

#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <unistd.h>

#include <iostream>

namespace flashlab::app {

namespace {

std::string bytes_text(double b) { return sim::format_bytes(b); }

// Nsight Compute measures a kernel by running a program under it: this same program, in
// compare's hidden --gpu-only mode, which runs that one kernel once and prints nothing.
std::vector<std::string> gpu_only_command(const KernelRun& r) {
  std::vector<std::string> argv{fmt::format("/proc/{}/exe", getpid()),
                                "compare",
                                "--gpu-only",
                                r.kernel,
                                "--n",
                                std::to_string(r.n),
                                "--n-q",
                                std::to_string(r.n_q),
                                "--d",
                                std::to_string(r.d),
                                "--heads",
                                std::to_string(r.heads),
                                "--dtype",
                                r.dtype,
                                "--seed",
                                std::to_string(r.seed),
                                "--large"};
  if (r.causal) argv.push_back("--causal");
  return argv;
}

}  // namespace

const sim::HardwareProfile& h200() { return sim::find_profile("h200"); }

cpu::Causal KernelRun::alignment() const {
  if (!causal) return cpu::Causal::none;
  return queries() == n ? cpu::Causal::top_left : cpu::Causal::bottom_right;
}

Prediction predict(const KernelRun& run) {
  const sim::Problem asked{.N = run.n,
                           .d = run.d,
                           .dtype = sim::parse_dtype(run.dtype),
                           .causal = run.alignment(),
                           .sram_bytes = h200().sram_per_sm,
                           .l2_bytes = h200().l2_bytes};
  const KernelMirror mirror = kernel_mirror(run.kernel, asked);
  Prediction p{run.kernel, run.kernel, std::nullopt, run.heads, ""};
  if (!mirror.algorithm) {
    p.why_not = mirror.why_not;
    return p;
  }
  if (const auto& t = mirror.problem.tiles)
    p.label = fmt::format("{} (Br {}, Bc {})", run.kernel, t->Br, t->Bc);
  if (run.queries() != run.n) {
    p.why_not = "not modelled (the simulator takes N_q = N_k)";
    return p;
  }
  p.report = sim::count(*mirror.algorithm, mirror.problem);
  return p;
}

NcuOutcome measure(const KernelRun& run, bool no_ncu) {
  if (no_ncu) return {std::nullopt, "not measured (--no-ncu)"};
  const auto ncu = find_ncu();
  if (!ncu) return {std::nullopt, "unavailable: ncu (Nsight Compute) is not installed"};
  std::cerr << "flashlab: measuring the " << run.kernel
            << " kernel's bytes with Nsight Compute...\n";
  NcuOutcome outcome = measure_with_ncu(*ncu, gpu_only_command(run));
  if (!outcome.bytes) outcome.message = "unavailable: " + outcome.message;
  return outcome;
}

std::string predicted_text(const Prediction& p) {
  if (!p.report) return p.why_not;
  return fmt::format("SMs read {}, write {}; DRAM {}", bytes_text(p.sm_read()),
                     bytes_text(p.sm_written()), bytes_text(p.dram()));
}

std::string measured_text(const NcuOutcome& o) {
  if (!o.bytes) return o.message;
  const auto& m = *o.bytes;
  return fmt::format("SMs read {}, write {}; L2 {}; DRAM {} read, {} written",
                     bytes_text(m.sm_read), bytes_text(m.sm_written), bytes_text(m.l2),
                     bytes_text(m.dram_read), bytes_text(m.dram_written));
}

std::string ratio_text(std::optional<double> measured, double predicted) {
  if (!measured || predicted <= 0) return "-";
  return fmt::format("{:.3f}", *measured / predicted);
}

}  // namespace flashlab::app

#include "kernel_bytes.hpp"

#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <cmath>
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
  if (r.fa3_kv_l2_share != FLASHLAB_FA3_AUTO) {
    argv.push_back("--fa3-kv-l2-share");
    argv.push_back(std::to_string(r.fa3_kv_l2_share));
  }
  return argv;
}

}  // namespace

NcuOutcome measure(const KernelRun& run, bool no_ncu) {
  if (no_ncu) return {std::nullopt, "not measured (--no-ncu)"};
  const auto ncu = find_ncu();
  if (!ncu) return {std::nullopt, "unavailable: ncu (Nsight Compute) is not installed"};
  std::cerr << "flashlab: measuring the " << run.kernel << " kernel's bytes with Nsight Compute "
            << describe(ncu_clocks()) << "...\n";
  NcuOutcome outcome = measure_with_ncu(*ncu, gpu_only_command(run));
  if (!outcome.bytes) outcome.message = "unavailable: " + outcome.message;
  return outcome;
}

// " (of which TMA stores 1.0 MiB, queue claims 480 B)" where some of the writes leave
// otherwise than by the L1's store instructions.
std::string beside_stores_text(const Prediction& p) {
  std::vector<std::string> parts;
  if (p.sm_written_by_tma() > 0) parts.push_back("TMA stores " + bytes_text(p.sm_written_by_tma()));
  if (p.sm_written_by_atomics() > 0)
    parts.push_back("queue claims " + bytes_text(p.sm_written_by_atomics()));
  return parts.empty() ? std::string() : fmt::format(" (of which {})", fmt::join(parts, ", "));
}

std::string predicted_text(const Prediction& p) {
  if (!p.modelled()) return p.why_not;
  const std::string assumed = p.assumption.empty() ? "" : "; " + p.assumption;
  if (!p.dram_modelled())
    return fmt::format("SMs read {}, write {}{}; DRAM not modelled (no grid for this kernel){}",
                       bytes_text(p.sm_read()), bytes_text(p.sm_written()), beside_stores_text(p),
                       assumed);
  const std::string dirty =
      p.grid ? fmt::format(" (+ {} left dirty)", bytes_text(p.left_dirty())) : "";
  return fmt::format("SMs read {}, write {}{}; DRAM {} read, {} written{}{}",
                     bytes_text(p.sm_read()), bytes_text(p.sm_written()), beside_stores_text(p),
                     bytes_text(p.dram_read()), bytes_text(p.dram_written()), dirty, assumed);
}

std::string measured_text(const NcuOutcome& o, bool beside_stores) {
  if (!o.bytes) return o.message;
  const auto& m = *o.bytes;
  // TMA stores and atomics leave the SMs beside the store sectors: out over issued is then no
  // merge.
  const auto merged = beside_stores ? std::nullopt : m.merge_ratio();
  const auto coalescing = m.coalescing();
  return fmt::format(
      "SMs read {}; store sectors issued {}, out of the SMs {}{}; L2 {}{}; DRAM {} read, {} "
      "written",
      bytes_text(m.sm_read), bytes_text(m.stores_issued), bytes_text(m.sm_written),
      merged ? fmt::format(" ({:.2f} of them)", *merged) : std::string(), bytes_text(m.l2),
      coalescing ? fmt::format(" (each slice read served {:.2f} SM reads)", *coalescing)
                 : std::string(),
      bytes_text(m.dram_read), bytes_text(m.dram_written));
}

std::string ratio_text(std::optional<double> measured, double predicted) {
  if (!measured || predicted <= 0) return "-";
  return fmt::format("{:.3f}", *measured / predicted);
}

std::string ratios_text(const NcuOutcome& o, double read_predicted, double stores_predicted,
                        double written_predicted) {
  if (!o.bytes) return "-";
  return fmt::format("read {}, stores {}, out {}", ratio_text(o.bytes->sm_read, read_predicted),
                     ratio_text(o.bytes->stores_issued, stores_predicted),
                     ratio_text(o.bytes->sm_written, written_predicted));
}

double grid_model_bytes(const KernelRun& run) {
  const auto id = kernel_by_name(run.kernel);
  if (!id || *id == FLASHLAB_KERNEL_NAIVE) return 0;
  const sim::DType dtype = sim::parse_dtype(run.dtype);
  const gpu::KernelInfo info = gpu::kernel_info(*id, run.d, c_dtype(dtype));
  if (!info.supported || info.config.Br <= 0) return 0;
  const double s = double(sim::bytes_of(dtype)), d = double(run.d), n_q = double(run.queries());
  const double query_tiles = std::ceil(n_q / double(info.config.Br));
  const double keys_seen = double(run.n) * (run.causal ? 0.5 : 1.0);
  return double(run.heads) * (n_q * d * s + query_tiles * 2 * keys_seen * d * s);
}

void check_grid_model_time(double bytes, double max_seconds, bool large, std::string_view what,
                           std::string_view smaller) {
  const double seconds = bytes / kGridModelBytesPerSecond;
  if (seconds <= max_seconds || large) return;
  throw cpu::InvalidArgument(fmt::format(
      "{}'s grid models would move about {} into the SMs through the L2 line by line, about {:.0f} "
      "s at {} a second, more than the {:.0f} s it takes without --large; pass --large to run it "
      "anyway, or lower {}",
      what, bytes_text(bytes), seconds, bytes_text(kGridModelBytesPerSecond), max_seconds,
      smaller));
}

}  // namespace flashlab::app

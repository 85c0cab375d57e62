// The bytes of one GPU kernel run, two ways: predicted by the simulator's mirror of the
// kernel as built (its facts from gpu/'s kernel table), and measured by Nsight Compute at the
// SMs, the L2 slices and DRAM, running this same program in compare's hidden --gpu-only mode.
// `flashlab compare` sets them side by side for one problem, and across a sweep.
#pragma once

#include "gpu_bridge/ncu_bytes.hpp"

#include "flashlab/cpu/mask.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flashlab::app {

using cpu::Index;

// The profile every figure of compare refers to: the machine the kernels were built for.
const sim::HardwareProfile& h200();

// One run of one kernel: batch 1, `heads` heads (copies of the same Q, K, V in memory of
// their own), N_q queries against N keys.
struct KernelRun {
  std::string kernel;
  Index n = 1024, n_q = 0, d = 64, heads = 1;  // n_q = 0: N_q = N
  std::string dtype = "bf16";
  bool causal = false;
  std::uint64_t seed = 0;

  Index queries() const { return n_q > 0 ? n_q : n; }
  // With N_q != N a causal mask must say how queries align with keys: decoding against a
  // cache needs the last query to see every key (bottom-right).
  cpu::Causal alignment() const;
};

// The simulator's count for one head, on one SM's SRAM, with the H200's L2 in front of HBM;
// the run's figures are it times the heads (each head's blocks move their own tiles).
struct Prediction {
  std::string kernel;  // "fa2"
  std::string label;   // "fa2 (Br 128, Bc 64)"
  std::optional<sim::Report> report;
  Index heads = 1;
  std::string why_not;  // when there is no report

  double sm_read() const { return report ? double(report->bytes_read()) * double(heads) : 0; }
  double sm_written() const { return report ? double(report->bytes_written()) * double(heads) : 0; }
  double dram() const { return report ? double(report->dram_total()) * double(heads) : 0; }
};

Prediction predict(const KernelRun& run);

// The kernel's bytes under Nsight Compute, or why there are none.
NcuOutcome measure(const KernelRun& run, bool no_ncu);

// "SMs read 65.0 MiB, write 1.0 MiB; DRAM 4.0 MiB", or why there is no prediction.
std::string predicted_text(const Prediction& p);
// "SMs read ..., write ...; L2 ...; DRAM ... read, ... written", or why nothing was measured.
std::string measured_text(const NcuOutcome& o);
// measured / predicted to three decimals, or "-" when either is missing.
std::string ratio_text(std::optional<double> measured, double predicted);

}  // namespace flashlab::app

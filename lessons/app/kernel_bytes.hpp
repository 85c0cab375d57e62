// The bytes of one GPU kernel run, measured by Nsight Compute at the SMs, the L2 slices and
// DRAM (running this same program in compare's hidden --gpu-only mode), and the texts that
// set them beside the prediction of the kernel's mirror (gpu_bridge/kernels.hpp).
// `flashlab compare` shows them for one problem, and across a sweep.
#pragma once

#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/ncu_bytes.hpp"

#include "flashlab/cpu/mask.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flashlab::app {

// The kernel's bytes under Nsight Compute, or why there are none.
NcuOutcome measure(const KernelRun& run, bool no_ncu);

// "SMs read 65.0 MiB, write 1.0 MiB; DRAM 4.0 MiB", or why there is no prediction.
std::string predicted_text(const Prediction& p);
// "SMs read ..., write ...; L2 ...; DRAM ... read, ... written", or why nothing was measured.
std::string measured_text(const NcuOutcome& o);
// measured / predicted to three decimals, or "-" when either is missing.
std::string ratio_text(std::optional<double> measured, double predicted);

}  // namespace flashlab::app

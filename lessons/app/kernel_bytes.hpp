// The bytes of one GPU kernel run, measured by Nsight Compute at the SMs (into them, the
// store sectors the L1 issued, out of them), the L2 slices and DRAM (running this same
// program in compare's hidden --gpu-only mode), and the texts that set them beside the
// prediction of the kernel's mirror (gpu_bridge/kernels.hpp). `flashlab compare` shows them
// for one problem, and across a sweep.
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
// "SMs read ...; store sectors issued ..., out of the SMs ... (0.52 of them); L2 ...; DRAM
// ... read, ... written", or why nothing was measured.
// beside_stores: the kernel also writes otherwise than by store instructions (TMA stores, a
// work queue's claims), so out of the SMs over the store sectors issued is no merge ratio and
// is not shown.
std::string measured_text(const NcuOutcome& o, bool beside_stores = false);
// measured / predicted to three decimals, or "-" when either is missing.
std::string ratio_text(std::optional<double> measured, double predicted);
// "read 1.000, stores 1.000": into the SMs, and the store sectors the L1 issued against the
// bytes the mirror writes (its writes are those sectors); "-" when nothing was measured.
// "read r, stores s, out o": measured over predicted bytes into the SMs, store sectors the L1
// issued (the prediction's writes less its TMA stores and atomics), and bytes out of the SMs.
std::string ratios_text(const NcuOutcome& o, double read_predicted, double stores_predicted,
                        double written_predicted);

}  // namespace flashlab::app

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

// The grid models (the scalar kernel's, fa2's, fa3's and the backward's) move every tile the
// blocks move through the L2's lines: about a second for each GiB into the SMs on a small
// machine (1,024 heads at N = 4,096, 33 GiB: fa2's in 18 s, fa3's in 30 s; the backward at
// 16 heads, N = 16,384, 8.6 GiB in 10 s). A comparison asks for --large past about a minute of
// them, a sweep (which shows its progress) past about half an hour.
inline constexpr double kGridModelBytesPerSecond = double(std::int64_t{1} << 30);
inline constexpr double kMaxGridModelSeconds = 60;
inline constexpr double kMaxSweepGridModelSeconds = 1800;

// The bytes into the SMs a forward kernel's grid model moves, estimated before it runs from the
// kernel's tiles: each query tile reads its Q and the K and V of the keys it sees (about half
// of them under the mask), in every head. 0 where no grid model runs (the naive kernel's
// launches are closed forms) or the kernel does not take the shape.
double grid_model_bytes(const KernelRun& run);

// Refuses (cpu::InvalidArgument) a run whose grid models would move `bytes` into the SMs for
// longer than `max_seconds` at kGridModelBytesPerSecond, unless `large`; `what` names the run
// and `smaller` says what to lower.
void check_grid_model_time(double bytes, double max_seconds, bool large, std::string_view what,
                           std::string_view smaller);

}  // namespace flashlab::app

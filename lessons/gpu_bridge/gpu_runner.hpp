// Running flashlab's GPU forward kernels (gpu/, through its C ABI) on host matrices, for
// `flashlab compare` and the lessons' GPU steps. The first call loads the GPU runner plugin
// (runner_abi.h); where it cannot be loaded (no CUDA at build time, the plugin not built, no
// device), every call says plainly why nothing ran.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/types.hpp"
#include "flashlab/sim/dtype.hpp"

#include <string>

namespace flashlab::app {

struct GpuStatus {
  bool available = false;
  std::string description;  // the device's name, or why there is none
};

// Loads the plugin on first use; later calls answer from what the first one found.
GpuStatus gpu_status();

struct GpuRun {
  std::string kernel;  // a name from the kernel table ("naive", "scalar", "fa2", ...)
  bool ran = false;
  std::string message;   // why it did not run (unsupported shape, no device, ...)
  cpu::Matrix<float> O;  // (N_q, d), read back and widened to fp32
  double median_ms = 0;  // CUDA events around the call, median of the repeats
};

// One forward call of `kernel` on Q (N_q, d), K, V (N_k, d), rounded to dtype on the way in,
// in batch 1 with `heads` heads (each a copy of the same matrices in memory of its own; O is
// head 0's). `warmups` untimed calls come first (module loading, cuBLAS set-up), then
// `repeats` >= 1 timed ones.
GpuRun run_gpu_forward(const std::string& kernel, const cpu::Matrix<float>& Q,
                       const cpu::Matrix<float>& K, const cpu::Matrix<float>& V, sim::DType dtype,
                       cpu::Causal causal, int warmups, int repeats, cpu::Index heads = 1);

}  // namespace flashlab::app

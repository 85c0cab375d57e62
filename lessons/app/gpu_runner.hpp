// Running flashlab's GPU forward kernels (gpu/, through the C ABI of flashlab.h) on host
// matrices, for `flashlab compare` and the lessons' GPU steps. Built with CUDA it runs them
// when a device is present; otherwise every call says plainly why nothing ran.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <string>
#include <vector>

namespace flashlab::app {

struct GpuStatus {
  bool available = false;
  std::string description;  // the device's name, or why there is none
};

GpuStatus gpu_status();

enum class GpuDtype { fp32, fp16, bf16 };

struct GpuRun {
  std::string kernel;       // "naive", "scalar", "fa2"
  bool ran = false;
  std::string message;      // why it did not run (unsupported shape, no device, ...)
  cpu::Matrix<float> O;     // (N_q, d), read back and widened to fp32
  double median_ms = 0;     // CUDA events around the call, median of the repeats
};

// The kernels of the ladder, simplest first.
std::vector<std::string> gpu_kernels();

// One (batch 1, head 1) forward call of `kernel` on Q (N_q, d), K, V (N_k, d), rounded to
// dtype on the way in. causal: 0 none, 1 top-left, 2 bottom-right (flashlab.h's values).
// `warmups` untimed calls come first (module loading, cuBLAS set-up), then `repeats` >= 1
// timed ones.
GpuRun run_gpu_forward(const std::string& kernel, const cpu::Matrix<float>& Q,
                       const cpu::Matrix<float>& K, const cpu::Matrix<float>& V, GpuDtype dtype,
                       int causal, int warmups, int repeats);

}  // namespace flashlab::app

// The closing step of a lesson that has a GPU counterpart: with a GPU, the same inputs
// through the CPU reference and flashlab's kernels side by side; without one, a plain
// statement of what that step would show and how to run it.
#pragma once

#include "gpu_bridge/kernels.hpp"
#include "kit/lesson_context.hpp"

#include "flashlab/cpu/mask.hpp"

#include <string>
#include <vector>

namespace flashlab::app {

using cpu::Index;

struct GpuStep {
  Index N = 1024, N_q = 0, d = 64;  // N_q = 0: N_q = N
  cpu::Causal causal = cpu::Causal::none;
  std::vector<std::string> kernels = kernel_names();  // the whole ladder by default
  std::string what_it_shows;  // one or two sentences for the step without a GPU
};

void gpu_side_by_side(LessonContext& ctx, const GpuStep& step);

}  // namespace flashlab::app

// Lesson 9's GPU step: the fa3 kernel (gpu/kernels/06_fa3.cu) under FlashAttention-4's
// conditional rescaling, run through the GPU runner on the lesson's own inputs, its counts
// of what every (row, KV tile) update did (first, rescaled, skipped, kept) read back from
// the device and set beside the CPU reference's forward_conditional on the same inputs: the
// same bf16 values, fa3's tiles (kernel_info.hpp), the same tau. Whether they agree is
// cpu::compare_rescale_counts's rule, the one tests/gpu applies.
#pragma once

#include "kit/lesson_context.hpp"

#include "flashlab/cpu/conditional_rescaling.hpp"

#include <string>
#include <vector>

namespace flashlab::app {

struct RescaleCase {
  std::string label;           // how the scores were made ("random", ...)
  cpu::Matrix<float> Q, K, V;  // (N, d) each, fp32; the step rounds them to bf16
};

// The CPU column: forward_conditional on Q, K, V rounded to bf16, with fa3's tiles
// (Br = gpu::fa3::br(d), Bc = gpu::fa3::kBc) and FlashAttention-4's tau, non-causal.
cpu::RescaleCounts reference_rescale_counts(const RescaleCase& c);

// Without a GPU: why, what the step would show, and the CPU column it would be checked
// against. With one: the device's counts beside the reference's and whether they agree.
// lesson_tile: the tile size of the lesson's own CPU counts, named in the text.
void gpu_rescale_step(LessonContext& ctx, const std::vector<RescaleCase>& cases,
                      cpu::Index lesson_tile);

}  // namespace flashlab::app

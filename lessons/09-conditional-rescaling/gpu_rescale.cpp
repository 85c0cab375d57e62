#include "09-conditional-rescaling/gpu_rescale.hpp"

#include "gpu_bridge/gpu_runner.hpp"

#include "flashlab/gpu/kernel_info.hpp"

#include <fmt/core.h>

namespace flashlab::app {

namespace {

constexpr sim::DType kDType = sim::DType::bf16;

std::vector<std::string> count_cells(const cpu::RescaleCounts& n) {
  return {fmt::format("{}", n.first), fmt::format("{}", n.rescaled), fmt::format("{}", n.skipped),
          fmt::format("{}", n.kept), fmt::format("{:.0f}%", 100 * n.skipped_fraction())};
}

std::vector<std::string> row(const std::string& label, const std::string& run,
                             std::vector<std::string> cells, const std::string& agree) {
  std::vector<std::string> r{label, run};
  r.insert(r.end(), cells.begin(), cells.end());
  r.push_back(agree);
  return r;
}

}  // namespace

cpu::RescaleCounts reference_rescale_counts(const RescaleCase& c) {
  cpu::AttentionOptions options;
  options.tiles = {gpu::fa3::br(c.Q.cols()), gpu::fa3::kBc};
  return cpu::forward_conditional<cpu::bf16>(c.Q.cast<cpu::bf16>(), c.K.cast<cpu::bf16>(),
                                             c.V.cast<cpu::bf16>(), options)
      .rescales;
}

void gpu_rescale_step(LessonContext& ctx, const std::vector<RescaleCase>& cases,
                      cpu::Index lesson_tile) {
  ctx.step("On a GPU: fa3's conditional rescales beside the reference's");
  const GpuStatus status = gpu_status();
  ctx.print(
      "flashlab's Hopper kernel fa3 implements FlashAttention-4's rule as a switch\n"
      "(flashlab/fa3.h, conditional_rescale = 1, tau = {:g}) and counts on the device what\n"
      "every (row, KV tile) update did. The CPU reference runs forward_conditional on the\n"
      "same inputs rounded to bf16, with fa3's tiles (Br = {}, Bc = {}): its counts differ\n"
      "from step 2's, taken in fp32 with tiles of {} x {}. The two agree when `first` and\n"
      "the number of later updates are equal (the shape fixes them) and rescaled, skipped\n"
      "and kept each differ by at most 1% of the reference's growths, and at least 2: a max\n"
      "within rounding of the threshold may be decided the other way on scores the device\n"
      "rounds differently.\n\n",
      cpu::kFa4RescaleThresholdLog2, gpu::fa3::br(cases.empty() ? 128 : cases.front().Q.cols()),
      gpu::fa3::kBc, lesson_tile, lesson_tile);
  if (!status.available)
    ctx.print(
        "No GPU here: {}.\n"
        "With one, this step runs fa3 on the inputs of step 2 and prints the device's counts\n"
        "beside the CPU reference's below, and whether they agree.\n"
        "Run `flashlab lesson 9` on a machine with an NVIDIA Hopper GPU and a CUDA build.\n\n",
        status.description);
  else
    ctx.print("{}.\n\n", status.description);

  Table t({"scores", "run", "first", "rescaled", "skipped", "kept", "saved", "agree"},
          {true, true});
  for (const RescaleCase& c : cases) {
    const cpu::RescaleCounts ref = reference_rescale_counts(c);
    t.add(row(c.label, "CPU reference", count_cells(ref), "-"));
    if (!status.available) continue;
    const GpuRescaleRun gpu = run_gpu_rescale_counts(c.Q, c.K, c.V, kDType, cpu::Causal::none);
    if (!gpu.ran) {
      t.add(row(c.label, "GPU fa3", {"-", "-", "-", "-", "-"}, "not run: " + gpu.message));
      continue;
    }
    const cpu::RescaleAgreement a = cpu::compare_rescale_counts(gpu.counts, ref);
    t.add(row(c.label, "GPU fa3", count_cells(gpu.counts),
              a.agree ? fmt::format("yes (within {})", a.slack) : "NO: " + a.reason));
  }
  ctx.table(t);
  ctx.say(
      "On the GPU a skipped rescale is a row of U (d multiplies) that is not multiplied by\n"
      "alpha; fa3 skips the whole U rescale of a warp when none of its rows moved its base.\n\n");
}

}  // namespace flashlab::app

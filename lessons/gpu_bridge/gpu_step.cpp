#include "gpu_bridge/gpu_step.hpp"

#include "gpu_bridge/gpu_runner.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/naive.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

namespace flashlab::app {

namespace {

constexpr int kWarmups = 2, kRepeats = 10;
constexpr std::uint64_t kSeed = 0;

std::string compare_command(const GpuStep& s) {
  return fmt::format("flashlab compare --n {}{} --d {}{}", s.N,
                     s.N_q ? fmt::format(" --n-q {}", s.N_q) : std::string(), s.d,
                     s.causal != cpu::Causal::none ? " --causal" : "");
}

}  // namespace

void gpu_side_by_side(LessonContext& ctx, const GpuStep& s) {
  ctx.step("On a GPU");
  const GpuStatus status = gpu_status();
  if (!status.available) {
    ctx.print(
        "No GPU here: {}.\nWith one, this step runs flashlab's kernels ({}) on the same bf16 "
        "inputs as the\n"
        "CPU reference and prints each one's max error against fp64 and its time.\n{}\n"
        "The same comparison, with the simulator's predicted bytes and Nsight Compute's\n"
        "measured ones: `{}`.\n\n",
        status.description, fmt::join(s.kernels, ", "), s.what_it_shows, compare_command(s));
    return;
  }
  const Index n_q = s.N_q ? s.N_q : s.N;
  const auto kv = random_inputs({.N = s.N, .d = s.d, .seed = kSeed});
  const auto q = random_inputs({.N = n_q, .d = s.d, .seed = kSeed + 1});
  const cpu::Matrix<float> Q = q.Q.cast<cpu::bf16>().cast<float>(),
                           K = kv.K.cast<cpu::bf16>().cast<float>(),
                           V = kv.V.cast<cpu::bf16>().cast<float>();
  cpu::AttentionOptions options;
  options.causal = s.causal;
  const auto exact =
      cpu::naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>(), options);
  ctx.print("{}: N_q = {}, N_k = {}, d = {}, bf16, causal = {}.\n\n", status.description, n_q, s.N,
            s.d, cpu::to_string(s.causal));
  Table t({"kernel", "max |O - O_fp64|", "median time"}, {true});
  for (const auto& kernel : s.kernels) {
    const auto run =
        run_gpu_forward(kernel, Q, K, V, sim::DType::bf16, s.causal, kWarmups, kRepeats);
    if (!run.ran) {
      t.add({kernel, "not run: " + run.message, "-"});
      continue;
    }
    t.add({kernel, num((run.O.cast<double>() - exact.O).cwiseAbs().maxCoeff(), 3),
           fmt::format("{:.1f} us", run.median_ms * 1e3)});
  }
  ctx.table(t);
  ctx.print("{}\nBytes, predicted and measured: `{}`.\n\n", s.what_it_shows, compare_command(s));
}

}  // namespace flashlab::app

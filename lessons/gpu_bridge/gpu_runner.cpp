// The program's side of the GPU runner: finds the plugin (runner_abi.h), loads it with
// dlopen the first time a GPU step asks, and turns host matrices into its plain C calls.
// Nothing here links CUDA: a machine without it, or without a GPU, gets a sentence saying so.
#include "gpu_bridge/gpu_runner.hpp"

#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/runner_abi.h"
#include "flashlab/sim/units.hpp"

#include <dlfcn.h>
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>

namespace flashlab::app {

namespace {

constexpr const char* kPluginFile = "libflashlab_gpu_runner.so";

struct Plugin {
  flashlab_runner_device_fn device = nullptr;
  flashlab_runner_forward_fn forward = nullptr;
  flashlab_runner_backward_fn backward = nullptr;
  flashlab_runner_decode_fn decode = nullptr;
  flashlab_runner_rescale_fn rescale = nullptr;
};

// Where the plugin may be, first match wins: $FLASHLAB_GPU_RUNNER, beside the program, and
// where this build put it.
std::vector<std::filesystem::path> plugin_candidates() {
  std::vector<std::filesystem::path> paths;
  if (const char* env = std::getenv("FLASHLAB_GPU_RUNNER"); env && *env) paths.emplace_back(env);
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) paths.push_back(self.parent_path() / kPluginFile);
#ifdef FLASHLAB_GPU_RUNNER_BUILT_AT
  paths.emplace_back(FLASHLAB_GPU_RUNNER_BUILT_AT);
#endif
  return paths;
}

// The loaded plugin, or why there is none.
struct Loaded {
  std::optional<Plugin> plugin;
  std::string why_not;
};

Loaded load_plugin() {
#ifndef FLASHLAB_GPU_RUNNER_BUILT_AT  // set only where this build had CUDA and made the plugin
  if (!std::getenv("FLASHLAB_GPU_RUNNER"))
    return {std::nullopt,
            "this flashlab was built without CUDA (no nvcc found at configure time), "
            "so gpu/ is not part of it"};
#endif
  std::string tried;
  for (const auto& path : plugin_candidates()) {
    if (!std::filesystem::exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path.string();
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return {std::nullopt,
              fmt::format("the GPU runner {} could not be loaded: {}", path.string(), dlerror())};
    const auto version =
        reinterpret_cast<flashlab_runner_version_fn>(dlsym(handle, "flashlab_runner_version"));
    Plugin p{
        reinterpret_cast<flashlab_runner_device_fn>(dlsym(handle, "flashlab_runner_device")),
        reinterpret_cast<flashlab_runner_forward_fn>(dlsym(handle, "flashlab_runner_forward")),
        reinterpret_cast<flashlab_runner_backward_fn>(dlsym(handle, "flashlab_runner_backward")),
        reinterpret_cast<flashlab_runner_decode_fn>(dlsym(handle, "flashlab_runner_decode")),
        reinterpret_cast<flashlab_runner_rescale_fn>(dlsym(handle, "flashlab_runner_rescale"))};
    if (!version || !p.device || !p.forward || !p.backward || !p.decode || !p.rescale ||
        version() != FLASHLAB_RUNNER_VERSION)
      return {std::nullopt,
              fmt::format("{} is not a GPU runner of this flashlab (version {} expected): "
                          "rebuild it with `cmake --build build --target flashlab_gpu_runner`",
                          path.string(), FLASHLAB_RUNNER_VERSION)};
    return {p, ""};
  }
  return {std::nullopt,
          fmt::format("the GPU runner ({}) is not built (looked at: {}); build it with "
                      "`cmake --build build --target flashlab_gpu_runner`",
                      kPluginFile, tried)};
}

const Loaded& loaded() {
  static const Loaded once = load_plugin();  // dlopen at most once per process
  return once;
}

}  // namespace

GpuStatus gpu_status() {
  const Loaded& l = loaded();
  if (!l.plugin) return {false, l.why_not};
  char description[256];
  const bool present = l.plugin->device(description, sizeof description) == 1;
  return {present, description};
}

std::string gpu_line(const GpuStatus& status) {
  std::string line = "GPU: " + status.description + "\n";
  if (!status.available) return line;
  const sim::HardwareProfile& target = target_profile();
  if (status.description.find(target.device_name) != std::string::npos) return line;
  std::string part(target.name);
  std::ranges::transform(part, part.begin(), [](unsigned char c) { return std::toupper(c); });
  return line + fmt::format(
                    "note: the predictions are for the {} ({} SMs, {} of L2), not this "
                    "device: bytes into and out of the SMs still compare, the L2's and "
                    "DRAM's bytes and the times do not\n",
                    part, target.sm_count, sim::format_bytes(double(target.l2_bytes)));
}

std::string target_line() {
  const sim::HardwareProfile& target = target_profile();
  return fmt::format("Predicted for {}: {}, {} SMs, {} of L2 in {} partition{}\n", target.name,
                     target.description, target.sm_count,
                     sim::format_bytes(double(target.l2_bytes)), target.l2_partitions,
                     target.l2_partitions > 1 ? "s" : "");
}

void run_ncu_first_kernel(std::string_view who) {
  // One query a head against 4096 keys, d = 128, bf16 (2 MiB of K and V a head), in as many
  // heads as K and V of kL2sRead L2s take: a read that leaves nothing of before in the L2.
  constexpr cpu::Index kKeys = 4096, kD = 128, kL2sRead = 2;
  constexpr sim::DType kDtype = sim::DType::bf16;
  const sim::Bytes kv_per_head = 2 * kKeys * kD * sim::bytes_of(kDtype);  // K and V
  const cpu::Index heads = kL2sRead * target_profile().l2_bytes / kv_per_head;
  const cpu::Matrix<float> q = cpu::Matrix<float>::Zero(1, kD);
  const cpu::Matrix<float> kv = cpu::Matrix<float>::Zero(kKeys, kD);
  const GpuRun run = run_gpu_forward("fa2", q, kv, kv, kDtype, cpu::Causal::none,
                                     /*warmups=*/0, /*repeats=*/1, heads);
  if (!run.ran)
    throw std::runtime_error(fmt::format("{}: the first kernel did not run: {}", who, run.message));
}

GpuRun run_gpu_forward(const std::string& kernel, const cpu::Matrix<float>& Q,
                       const cpu::Matrix<float>& K, const cpu::Matrix<float>& V, sim::DType dtype,
                       cpu::Causal causal, int warmups, int repeats, cpu::Index heads,
                       std::int32_t fa3_kv_l2_share) {
  GpuRun run{kernel, false, "", {}, 0};
  const GpuStatus status = gpu_status();
  if (!status.available) {
    run.message = status.description;
    return run;
  }
  const auto id = kernel_by_name(kernel);
  if (!id) {
    run.message = unknown_kernel_message(kernel);
    return run;
  }
  run.O = cpu::Matrix<float>::Zero(Q.rows(), Q.cols());
  const std::int32_t share = *id == FLASHLAB_KERNEL_FA3 ? fa3_kv_l2_share : FLASHLAB_FA3_AUTO;
  const flashlab_runner_call call{Q.data(), K.data(), V.data(), run.O.data(),   Q.rows(),
                                  K.rows(), Q.cols(), heads,    c_dtype(dtype), c_causal(causal),
                                  *id,      warmups,  repeats,  share};
  flashlab_runner_result result{};
  loaded().plugin->forward(&call, &result);
  run.ran = result.ran == 1;
  run.median_ms = result.median_ms;
  run.message = result.message;
  if (!run.ran) run.O.resize(0, 0);
  return run;
}

namespace {

// Why nothing can run: no usable plugin or no device; "" when a GPU is there.
std::string why_no_gpu() {
  const GpuStatus status = gpu_status();
  return status.available ? "" : status.description;
}

// The C dtype of the backward and decode calls, or why there is none (they take fp16, bf16).
std::string half_dtype_refusal(sim::DType dtype, const char* what) {
  if (dtype == sim::DType::bf16 || dtype == sim::DType::fp16) return "";
  return fmt::format("{} runs in fp16 or bf16 on the GPU, not {}", what, sim::to_string(dtype));
}

}  // namespace

GpuRescaleRun run_gpu_rescale_counts(const cpu::Matrix<float>& Q, const cpu::Matrix<float>& K,
                                     const cpu::Matrix<float>& V, sim::DType dtype,
                                     cpu::Causal causal) {
  GpuRescaleRun run;
  run.message = half_dtype_refusal(dtype, "fa3's rescale count");
  if (run.message.empty() && (K.rows() != V.rows() || K.cols() != Q.cols() ||
                              V.cols() != Q.cols() || Q.size() == 0 || K.size() == 0))
    run.message = fmt::format(
        "shapes do not match: Q must be (N_q, d), K and V (N_k, d), none of them empty; got Q "
        "({}, {}), K ({}, {}), V ({}, {})",
        Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols());
  if (run.message.empty()) run.message = why_no_gpu();
  if (!run.message.empty()) return run;
  run.O = cpu::Matrix<float>::Zero(Q.rows(), Q.cols());
  const flashlab_runner_rescale_call call{.q = Q.data(),
                                          .k = K.data(),
                                          .v = V.data(),
                                          .o = run.O.data(),
                                          .n_q = Q.rows(),
                                          .n_k = K.rows(),
                                          .d = Q.cols(),
                                          .dtype = c_dtype(dtype),
                                          .causal = c_causal(causal)};
  flashlab_runner_rescale_result result{};
  loaded().plugin->rescale(&call, &result);
  run.ran = result.ran == 1;
  run.message = result.message;
  if (!run.ran) {
    run.O.resize(0, 0);
    return run;
  }
  const int64_t* n = result.counts;  // flashlab_rescale_count's order (runner_abi.h)
  run.counts.first = n[0], run.counts.rescaled = n[1], run.counts.skipped = n[2];
  run.counts.kept = n[3];
  return run;
}

GpuBackwardRun run_gpu_backward(const cpu::HeadTensor<float>& Q, const cpu::HeadTensor<float>& K,
                                const cpu::HeadTensor<float>& V, const cpu::HeadTensor<float>& dO,
                                const GpuBackwardOptions& o) {
  GpuBackwardRun run;
  run.message = half_dtype_refusal(o.dtype, "the backward");
  if (run.message.empty() && (Q.batch != 1 || K.batch != 1 || V.batch != 1 || dO.batch != 1))
    run.message = "the GPU backward step takes batch 1 (one sequence, several heads)";
  if (run.message.empty() &&
      (K.heads != V.heads || K.rows != V.rows || K.cols != Q.cols || V.cols != Q.cols ||
       dO.heads != Q.heads || dO.rows != Q.rows || dO.cols != Q.cols))
    run.message = fmt::format(
        "shapes do not match: Q and dO must be (heads_q, N_q, d), K and V (heads_kv, N_k, d); "
        "got Q ({}, {}, {}), dO ({}, {}, {}), K ({}, {}, {}), V ({}, {}, {})",
        Q.heads, Q.rows, Q.cols, dO.heads, dO.rows, dO.cols, K.heads, K.rows, K.cols, V.heads,
        V.rows, V.cols);
  if (run.message.empty()) run.message = why_no_gpu();
  if (!run.message.empty()) return run;
  run.dQ = cpu::HeadTensor<float>(1, Q.heads, Q.rows, Q.cols);
  run.dK = cpu::HeadTensor<float>(1, K.heads, K.rows, K.cols);
  run.dV = cpu::HeadTensor<float>(1, V.heads, V.rows, V.cols);
  const flashlab_runner_backward_call call{.q = Q.data.data(),
                                           .k = K.data.data(),
                                           .v = V.data.data(),
                                           .dout = dO.data.data(),
                                           .dq = run.dQ.data.data(),
                                           .dk = run.dK.data.data(),
                                           .dv = run.dV.data.data(),
                                           .n_q = Q.rows,
                                           .n_k = K.rows,
                                           .d = Q.cols,
                                           .heads_q = Q.heads,
                                           .heads_kv = K.heads,
                                           .dtype = c_dtype(o.dtype),
                                           .causal = c_causal(o.causal),
                                           .deterministic = o.deterministic ? 1 : 0,
                                           .warmups = o.warmups,
                                           .repeats = o.repeats};
  flashlab_runner_backward_result result{};
  loaded().plugin->backward(&call, &result);
  run.ran = result.ran == 1;
  run.message = result.message;
  run.median_ms = result.median_ms;
  run.workspace_bytes = result.workspace_bytes;
  run.bitwise_repeats = result.bitwise_repeats == 1;
  if (!run.ran) run.dQ = run.dK = run.dV = {};
  return run;
}

GpuDecodeRun run_gpu_decode(const cpu::HeadTensor<float>& Q, const cpu::HeadTensor<float>& K,
                            const cpu::HeadTensor<float>& V,
                            const std::vector<cpu::Index>& seq_lens, const GpuDecodeOptions& o) {
  GpuDecodeRun run;
  run.message = half_dtype_refusal(o.dtype, "decode");
  if (run.message.empty() && o.splits.empty())
    run.message = "no split counts to run: give at least one (0 = automatic)";
  if (run.message.empty() &&
      (K.batch != Q.batch || V.batch != Q.batch || K.heads != V.heads || K.rows != V.rows ||
       K.cols != Q.cols || V.cols != Q.cols || seq_lens.size() != std::size_t(Q.batch)))
    run.message = fmt::format(
        "shapes do not match: Q must be (batch, heads_q, N_q, d), K and V (batch, heads_kv, "
        "max_seq_len, d), and one length per sequence; got Q ({}, {}, {}, {}), K ({}, {}, {}, "
        "{}), V ({}, {}, {}, {}), {} lengths",
        Q.batch, Q.heads, Q.rows, Q.cols, K.batch, K.heads, K.rows, K.cols, V.batch, V.heads,
        V.rows, V.cols, seq_lens.size());
  if (run.message.empty()) run.message = why_no_gpu();
  if (!run.message.empty()) return run;
  const auto configs = o.splits.size();
  std::vector<float> O(configs * Q.data.size()),
      L(configs * std::size_t(Q.batch * Q.heads * Q.rows));
  const std::vector<int32_t> lens(seq_lens.begin(), seq_lens.end()),
      splits(o.splits.begin(), o.splits.end());
  std::vector<int32_t> used(configs);
  run.median_ms.resize(configs);
  const flashlab_runner_decode_call call{.q = Q.data.data(),
                                         .k = K.data.data(),
                                         .v = V.data.data(),
                                         .seq_lens = lens.data(),
                                         .splits = splits.data(),
                                         .o = O.data(),
                                         .lse = L.data(),
                                         .splits_used = used.data(),
                                         .median_ms = run.median_ms.data(),
                                         .configs = int64_t(configs),
                                         .batch = Q.batch,
                                         .heads_q = Q.heads,
                                         .heads_kv = K.heads,
                                         .n_q = Q.rows,
                                         .max_seq_len = K.rows,
                                         .d = Q.cols,
                                         .page_size = o.page_size,
                                         .table_seed = o.table_seed,
                                         .dtype = c_dtype(o.dtype),
                                         .warmups = o.warmups,
                                         .repeats = o.repeats,
                                         .grid = o.queue ? FLASHLAB_DECODE_GRID_QUEUE
                                                         : FLASHLAB_DECODE_GRID_AUTO};
  flashlab_runner_decode_result result{};
  loaded().plugin->decode(&call, &result);
  run.ran = result.ran == 1;
  run.message = result.message;
  run.workspace_bytes = result.workspace_bytes;
  if (!run.ran) {
    run.median_ms.clear();
    return run;
  }
  run.splits_used.assign(used.begin(), used.end());
  for (std::size_t i = 0; i < configs; ++i) {
    auto& out = run.O.emplace_back(Q.batch, Q.heads, Q.rows, Q.cols);
    std::copy_n(O.begin() + std::ptrdiff_t(i * out.data.size()), out.data.size(), out.data.begin());
    auto& lse = run.L.emplace_back(Q.batch, Q.heads, Q.rows, 1);
    std::copy_n(L.begin() + std::ptrdiff_t(i * lse.data.size()), lse.data.size(), lse.data.begin());
  }
  return run;
}

}  // namespace flashlab::app

// The program's side of the GPU runner: finds the plugin (runner_abi.h), loads it with
// dlopen the first time a GPU step asks, and turns host matrices into its plain C calls.
// Nothing here links CUDA: a machine without it, or without a GPU, gets a sentence saying so.
#include "gpu_bridge/gpu_runner.hpp"

#include "gpu_bridge/kernels.hpp"
#include "gpu_bridge/runner_abi.h"

#include <dlfcn.h>
#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

namespace flashlab::app {

namespace {

constexpr const char* kPluginFile = "libflashlab_gpu_runner.so";

struct Plugin {
  flashlab_runner_device_fn device = nullptr;
  flashlab_runner_forward_fn forward = nullptr;
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
        reinterpret_cast<flashlab_runner_forward_fn>(dlsym(handle, "flashlab_runner_forward"))};
    if (!version || !p.device || !p.forward || version() != FLASHLAB_RUNNER_VERSION)
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

GpuRun run_gpu_forward(const std::string& kernel, const cpu::Matrix<float>& Q,
                       const cpu::Matrix<float>& K, const cpu::Matrix<float>& V, sim::DType dtype,
                       cpu::Causal causal, int warmups, int repeats, cpu::Index heads) {
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
  const flashlab_runner_call call{Q.data(), K.data(), V.data(), run.O.data(),   Q.rows(),
                                  K.rows(), Q.cols(), heads,    c_dtype(dtype), c_causal(causal),
                                  *id,      warmups,  repeats};
  flashlab_runner_result result{};
  loaded().plugin->forward(&call, &result);
  run.ran = result.ran == 1;
  run.median_ms = result.median_ms;
  run.message = result.message;
  if (!run.ran) run.O.resize(0, 0);
  return run;
}

}  // namespace flashlab::app

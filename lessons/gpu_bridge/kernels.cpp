#include "gpu_bridge/kernels.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

namespace flashlab::app {

// INTERIM: replaced by gpu/'s kernel table
namespace {
struct Entry { flashlab_kernel id; const char* name; };
constexpr Entry kTable[] = {{FLASHLAB_KERNEL_NAIVE, "naive"}, {FLASHLAB_KERNEL_SCALAR, "scalar"}, {FLASHLAB_KERNEL_FA2, "fa2"}};
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& e : kTable) names.emplace_back(e.name);
  return names;
}

std::string kernel_list() { return fmt::format("{}", fmt::join(kernel_names(), ",")); }

std::optional<flashlab_kernel> kernel_by_name(std::string_view name) {
  for (const auto& e : kTable) if (name == e.name) return e.id;
  return std::nullopt;
}

std::string unknown_kernel_message(std::string_view name) {
  return fmt::format("unknown GPU kernel `{}`: the kernels are {}", name, fmt::join(kernel_names(), ", "));
}

std::optional<KernelMirror> kernel_mirror(std::string_view kernel, cpu::Index d) {
  if (kernel == "naive") return KernelMirror{sim::Algorithm::naive, std::nullopt};
  if (kernel == "fa2") return KernelMirror{sim::Algorithm::fa2, cpu::TileSizes{128, d == 64 ? 128 : 64}};
  return std::nullopt;
}

flashlab_causal c_causal(cpu::Causal causal) {
  switch (causal) {
    case cpu::Causal::none: return FLASHLAB_CAUSAL_NONE;
    case cpu::Causal::top_left: return FLASHLAB_CAUSAL_TOP_LEFT;
    case cpu::Causal::bottom_right: return FLASHLAB_CAUSAL_BOTTOM_RIGHT;
  }
  return FLASHLAB_CAUSAL_NONE;
}

}  // namespace flashlab::app

#include "gpu_bridge/kernels.hpp"

#include "flashlab/gpu/kernel_info.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

namespace flashlab::app {

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const auto& k : gpu::kKernels) names.emplace_back(k.name);
  return names;
}

std::string kernel_list() { return fmt::format("{}", fmt::join(kernel_names(), ",")); }

std::optional<flashlab_kernel> kernel_by_name(std::string_view name) {
  const gpu::KernelRecord* k = gpu::find_kernel(name);
  if (!k) return std::nullopt;
  return k->id;
}

std::string unknown_kernel_message(std::string_view name) {
  return fmt::format("unknown GPU kernel `{}`: the kernels are {}", name, fmt::join(kernel_names(), ", "));
}

namespace {

// Which of the simulator's programs moves a kernel's bytes; none for a kernel not yet
// modelled (the scalar kernel's fp32 SRAM tiles are not).
std::optional<sim::Algorithm> mirror_program(flashlab_kernel kernel) {
  switch (kernel) {
    case FLASHLAB_KERNEL_NAIVE: return sim::Algorithm::naive;
    case FLASHLAB_KERNEL_FA2: return sim::Algorithm::fa2;
    case FLASHLAB_KERNEL_SCALAR: break;
  }
  return std::nullopt;
}

}  // namespace

KernelMirror kernel_mirror(std::string_view kernel, cpu::Index d, sim::DType dtype) {
  const auto id = kernel_by_name(kernel);
  if (!id) return {std::nullopt, std::nullopt, unknown_kernel_message(kernel)};
  const gpu::KernelInfo info = gpu::kernel_info(*id, d, c_dtype(dtype));
  if (!info.supported) return {std::nullopt, std::nullopt, info.reason};
  const auto program = mirror_program(*id);
  if (!program) return {std::nullopt, std::nullopt, "not modelled yet"};
  KernelMirror mirror{program, std::nullopt, ""};
  if (info.config.Br > 0) mirror.tiles = cpu::TileSizes{info.config.Br, info.config.Bc};
  return mirror;
}

flashlab_dtype c_dtype(sim::DType dtype) {
  switch (dtype) {
    case sim::DType::fp32: return FLASHLAB_FP32;
    case sim::DType::fp16: return FLASHLAB_FP16;
    case sim::DType::bf16: break;
  }
  return FLASHLAB_BF16;
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

// The lessons' view of gpu/'s kernel table (flashlab/gpu/kernel_info.hpp, the one owner of
// what each kernel is; it builds without CUDA, so a machine without a GPU lists and
// predicts the same kernels), and the one translation of the CPU reference's causal
// alignment into flashlab.h's.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/sim/problem.hpp"
#include "flashlab/flashlab.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app {

// The ladder's names, simplest kernel first.
std::vector<std::string> kernel_names();
// "naive,scalar,fa2": the default of options that take a list of kernels.
std::string kernel_list();
std::optional<flashlab_kernel> kernel_by_name(std::string_view name);
// "unknown GPU kernel `x`: the kernels are naive, scalar, fa2"
std::string unknown_kernel_message(std::string_view name);

// The simulator's mirror of a kernel: the program that moves its bytes and the kernel's own
// tiles; nothing for a kernel the simulator does not model yet.
struct KernelMirror {
  sim::Algorithm algorithm;
  std::optional<cpu::TileSizes> tiles;  // absent where the kernel has none (naive)
};
std::optional<KernelMirror> kernel_mirror(std::string_view kernel, cpu::Index d);

flashlab_causal c_causal(cpu::Causal causal);

}  // namespace flashlab::app

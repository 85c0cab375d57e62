// The lessons' view of gpu/'s kernel table (flashlab/gpu/kernel_info.hpp, the one owner of
// what each kernel is; it builds without CUDA, so a machine without a GPU lists and
// predicts the same kernels), and the one translation of the CPU reference's causal
// alignment into flashlab.h's.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/flashlab.h"
#include "flashlab/sim/problem.hpp"

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

// Why the kernel does not take this d and dtype (the table's sentence), or "" when it does.
std::string kernel_refusal(std::string_view kernel, cpu::Index d, sim::DType dtype);

// The simulator's mirror of a kernel as built: the program that moves its bytes, and the
// problem set up with the kernel's own facts from the table (its tiles, the dtype its score
// tile is kept in). Without a mirror, why_not says why (not modelled yet, or the kernel
// does not take this d or dtype).
struct KernelMirror {
  std::optional<sim::Algorithm> algorithm;
  sim::Problem problem;  // the caller's problem with the kernel's facts filled in
  std::string why_not;
};
// problem: N, d, dtype, causal, SRAM and L2 as the caller wants them simulated.
KernelMirror kernel_mirror(std::string_view kernel, const sim::Problem& problem);

flashlab_dtype c_dtype(sim::DType dtype);
flashlab_causal c_causal(cpu::Causal causal);

}  // namespace flashlab::app

// The kernel exercises' half of `flashlab check` (exercises 21, 22 and 23): their cases, the
// CPU reference they are held to, and the run of each case on the GPU through the plugin that
// holds the kernels (kernel_plugin.hpp), in a child process of its own.
#pragma once

#include "checker.hpp"

#include <string>

namespace flashlab::exercises {

// Fills `report` for kernel exercise `number` with the kernels of the plugin at `plugin_path`
// ("" where the build had no CUDA). Where no case can run (no CUDA, no GPU, a plugin that does
// not load) it sets report.not_run to why, and runs nothing.
void check_kernel_exercise(int number, const std::string& plugin_path, const CaseLimits& limits,
                           CheckReport& report);

}  // namespace flashlab::exercises

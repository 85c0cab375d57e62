// Loading a kernel-exercise plugin (kernels/plugin_abi.h) with dlopen. Only the child process
// of a case does it (kernel_checker.cpp), so the checker's own process never starts CUDA: a
// process that has started CUDA cannot hand it on to a child it forks.
#pragma once

#include "kernels/plugin_abi.h"

#include <string>

namespace flashlab::exercises {

struct KernelPlugin {
  flashlab_kx_device_fn device = nullptr;
  flashlab_kx_forward_fn forward = nullptr;
  flashlab_kx_combine_fn combine = nullptr;
};

// Throws std::runtime_error saying what is wrong: the file cannot be loaded, lacks an entry
// point, or is of another version (then it says how to rebuild it).
KernelPlugin load_kernel_plugin(const std::string& path);

// The plugin of the set a program was linked with (the student's in `flashlab`): where the
// build put it, or "" where the build had no CUDA. Defined by linked_plugin.cpp, compiled
// into each set's library.
std::string linked_kernel_plugin();

}  // namespace flashlab::exercises

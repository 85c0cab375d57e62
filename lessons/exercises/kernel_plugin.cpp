#include "kernel_plugin.hpp"

#include <dlfcn.h>
#include <fmt/core.h>

#include <stdexcept>

namespace flashlab::exercises {

KernelPlugin load_kernel_plugin(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw std::runtime_error(
        fmt::format("the kernel exercises' plugin could not be loaded: {}", ::dlerror()));
  const auto version =
      reinterpret_cast<flashlab_kx_version_fn>(::dlsym(handle, "flashlab_kx_version"));
  KernelPlugin p{reinterpret_cast<flashlab_kx_device_fn>(::dlsym(handle, "flashlab_kx_device")),
                 reinterpret_cast<flashlab_kx_forward_fn>(::dlsym(handle, "flashlab_kx_forward")),
                 reinterpret_cast<flashlab_kx_combine_fn>(::dlsym(handle, "flashlab_kx_combine"))};
  if (!version || !p.device || !p.forward || !p.combine ||
      version() != FLASHLAB_KERNEL_EXERCISES_VERSION)
    throw std::runtime_error(fmt::format(
        "{} is not a kernel-exercise plugin of this flashlab (version {} expected): rebuild it "
        "with `cmake --build build --target flashlab`",
        path, FLASHLAB_KERNEL_EXERCISES_VERSION));
  return p;
}

}  // namespace flashlab::exercises

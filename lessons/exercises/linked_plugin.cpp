// Where the kernel exercises' plugin of one set is: compiled once into each set's library
// (the student's, the solutions, a test's wrong ones), each time with its own
// FLASHLAB_KERNEL_PLUGIN, which the build sets only where it had nvcc.
#include "kernel_plugin.hpp"

namespace flashlab::exercises {

std::string linked_kernel_plugin() {
#ifdef FLASHLAB_KERNEL_PLUGIN
  return FLASHLAB_KERNEL_PLUGIN;
#else
  return "";
#endif
}

}  // namespace flashlab::exercises

// A stand-in GPU runner plugin for the version check: it reports FAKE_RUNNER_VERSION and
// exports version 2's calls (device and forward), plus the backward when the version is 3;
// never the decode call. The program must refuse both builds of it.
#include "gpu_bridge/runner_abi.h"

#include <cstring>

extern "C" {

__attribute__((visibility("default"))) int flashlab_runner_version(void) {
  return FAKE_RUNNER_VERSION;
}

__attribute__((visibility("default"))) int flashlab_runner_device(char* description, size_t size) {
  std::strncpy(description, "a fake device", size);
  return 1;
}

__attribute__((visibility("default"))) void flashlab_runner_forward(const flashlab_runner_call*,
                                                                    flashlab_runner_result* r) {
  *r = {};
}

#if FAKE_RUNNER_VERSION >= 3
__attribute__((visibility("default"))) void flashlab_runner_backward(
    const flashlab_runner_backward_call*, flashlab_runner_backward_result* r) {
  *r = {};
}
#endif

}  // extern "C"

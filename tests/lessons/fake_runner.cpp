// Stand-in GPU runner plugins, built three ways:
//   FAKE_RUNNER_PREVIOUS: the version before this one (runner_abi.h's FLASHLAB_RUNNER_VERSION
//     less one);
//   neither define: this version, every call but the rescale count; the program must refuse
//     both;
//   FAKE_RUNNER_ZEROS: every call of this version, each "running" on a pretend device and
//     returning zeros, so that the lessons' GPU steps can be driven end to end without a GPU
//     (and their checks seen to fail on wrong outputs).
#include "gpu_bridge/runner_abi.h"

#include <algorithm>
#include <cstring>

extern "C" {

__attribute__((visibility("default"))) int flashlab_runner_version(void) {
#ifdef FAKE_RUNNER_PREVIOUS
  return FLASHLAB_RUNNER_VERSION - 1;
#else
  return FLASHLAB_RUNNER_VERSION;
#endif
}

__attribute__((visibility("default"))) int flashlab_runner_device(char* description, size_t size) {
  std::strncpy(description, "a stand-in device that returns zeros", size);
  description[size - 1] = '\0';
  return 1;
}

__attribute__((visibility("default"))) void flashlab_runner_forward(const flashlab_runner_call* c,
                                                                    flashlab_runner_result* r) {
  *r = {};
  std::fill_n(c->o, c->n_q * c->d, 0.0f);
  r->ran = 1;
  r->median_ms = 1;
}

__attribute__((visibility("default"))) void flashlab_runner_backward(
    const flashlab_runner_backward_call* c, flashlab_runner_backward_result* r) {
  *r = {};
  std::fill_n(c->dq, c->heads_q * c->n_q * c->d, 0.0f);
  std::fill_n(c->dk, c->heads_kv * c->n_k * c->d, 0.0f);
  std::fill_n(c->dv, c->heads_kv * c->n_k * c->d, 0.0f);
  r->ran = 1;
  r->bitwise_repeats = 1;
  r->median_ms = 1;
}

__attribute__((visibility("default"))) void flashlab_runner_decode(
    const flashlab_runner_decode_call* c, flashlab_runner_decode_result* r) {
  *r = {};
  const int64_t rows = c->batch * c->heads_q * c->n_q;
  std::fill_n(c->o, c->configs * rows * c->d, 0.0f);
  std::fill_n(c->lse, c->configs * rows, 0.0f);
  for (int64_t i = 0; i < c->configs; ++i) {
    c->splits_used[i] = c->splits[i] > 0 ? c->splits[i] : 1;
    c->median_ms[i] = 1;
  }
  r->ran = 1;
}

#ifdef FAKE_RUNNER_ZEROS
__attribute__((visibility("default"))) void flashlab_runner_rescale(
    const flashlab_runner_rescale_call* c, flashlab_runner_rescale_result* r) {
  *r = {};  // every count 0
  std::fill_n(c->o, c->n_q * c->d, 0.0f);
  r->ran = 1;
}
#endif

}  // extern "C"

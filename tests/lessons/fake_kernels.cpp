// Stand-in kernel-exercise plugins (lessons/exercises/kernels/plugin_abi.h) that compute on the
// CPU and pretend to be a device, so that the kernel exercises' checker (its cases, its rule,
// its messages) is tested on machines without a GPU. What the harness does on the GPU, they do
// on the host: outputs filled with NaN first, then the "kernel", which the definitions choose:
//   FAKE_KERNELS_NO_RESCALE=0   attention (the online update, one key at a time) and the
//                               combine, right, in fp32
//   FAKE_KERNELS_NO_RESCALE=1   exercises 21/22 with U never rescaled by alpha; 23 with the last
//                               split left out
//   FAKE_KERNELS_SILENT         writes nothing: the NaN stays
//   FAKE_KERNELS_NOT_WRITTEN    the skeletons: not_written set
#include "kernels/plugin_abi.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

void fill_nan(float* x, int64_t n) {
  for (int64_t k = 0; k < n; ++k) x[k] = std::numeric_limits<float>::quiet_NaN();
}

// One row of attention in fp32, visiting the keys one at a time with the online update; with
// rescale_U = false, U keeps its old base when the max grows.
[[maybe_unused]] void attend_row(const flashlab_kx_forward_call& c, int64_t i, bool rescale_U) {
  const int64_t d = c.d, offset = c.n_k - c.n_q;
  const float scale = 1.0f / std::sqrt(float(d));
  float m = -kInf, l = 0.0f;
  std::vector<float> U(d, 0.0f);
  for (int64_t j = 0; j < c.n_k; ++j) {
    if (c.causal && j > i + offset) break;
    float s = 0.0f;
    for (int64_t k = 0; k < d; ++k) s += c.q[i * d + k] * c.k[j * d + k];
    s *= scale;
    const float m_new = std::fmax(m, s), alpha = std::exp(m - m_new), W = std::exp(s - m_new);
    l = alpha * l + W;
    for (int64_t k = 0; k < d; ++k) U[k] = (rescale_U ? alpha : 1.0f) * U[k] + W * c.v[j * d + k];
    m = m_new;
  }
  for (int64_t k = 0; k < d; ++k) c.o[i * d + k] = l > 0 ? U[k] / l : 0.0f;
  c.lse[i] = l > 0 ? m + std::log(l) : -kInf;
}

[[maybe_unused]] void combine_row(const flashlab_kx_combine_call& c, int64_t r, int64_t splits) {
  float m = -kInf;
  for (int64_t s = 0; s < splits; ++s) m = std::fmax(m, c.lse_splits[s * c.rows + r]);
  if (m == -kInf) {
    for (int64_t k = 0; k < c.d; ++k) c.o[r * c.d + k] = 0.0f;
    c.lse[r] = -kInf;
    return;
  }
  float l = 0.0f;
  for (int64_t s = 0; s < splits; ++s) l += std::exp(c.lse_splits[s * c.rows + r] - m);
  const float lse = m + std::log(l);
  for (int64_t k = 0; k < c.d; ++k) {
    float o = 0.0f;
    for (int64_t s = 0; s < splits; ++s)
      o += std::exp(c.lse_splits[s * c.rows + r] - lse) * c.o_splits[(s * c.rows + r) * c.d + k];
    c.o[r * c.d + k] = o;
  }
  c.lse[r] = lse;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int flashlab_kx_version(void) {
  return FLASHLAB_KERNEL_EXERCISES_VERSION;
}

__attribute__((visibility("default"))) int flashlab_kx_device(char* description, size_t size) {
  std::snprintf(description, size, "a pretend device (the CPU)");
  return 1;
}

__attribute__((visibility("default"))) void flashlab_kx_forward(const flashlab_kx_forward_call* c,
                                                                flashlab_kx_result* result) {
  *result = flashlab_kx_result{};
  fill_nan(c->o, c->n_q * c->d);
  fill_nan(c->lse, c->n_q);
  result->ran = 1;
#if defined(FAKE_KERNELS_NOT_WRITTEN)
  result->not_written = 1;
#elif !defined(FAKE_KERNELS_SILENT)
  for (int64_t i = 0; i < c->n_q; ++i) attend_row(*c, i, /*rescale_U=*/!FAKE_KERNELS_NO_RESCALE);
#endif
}

__attribute__((visibility("default"))) void flashlab_kx_combine(const flashlab_kx_combine_call* c,
                                                                flashlab_kx_result* result) {
  *result = flashlab_kx_result{};
  fill_nan(c->o, c->rows * c->d);
  fill_nan(c->lse, c->rows);
  result->ran = 1;
#if defined(FAKE_KERNELS_NOT_WRITTEN)
  result->not_written = 1;
#elif !defined(FAKE_KERNELS_SILENT)
  const int64_t splits = FAKE_KERNELS_NO_RESCALE ? c->splits - 1 : c->splits;
  for (int64_t r = 0; r < c->rows; ++r) combine_row(*c, r, splits);
#endif
}

}  // extern "C"

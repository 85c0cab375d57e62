// The GPU runner plugin (libflashlab_gpu_runner.so, see runner_abi.h): copies host matrices
// to the device, calls flashlab_forward (gpu/'s C ABI, as any other language would), times
// the calls with CUDA events and reads O back. The only part of lessons/ that links CUDA.
#include "runner_abi.h"

#include "flashlab/cpu/types.hpp"
#include "flashlab/flashlab.h"

#include <cuda_runtime.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace {

using flashlab::cpu::Index;
template <class T>
using Matrix = flashlab::cpu::Matrix<T>;
using ConstMap = Eigen::Map<const Matrix<float>>;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

// A device buffer holding `copies` copies of X rounded to T, row-major (rows, cols) each.
template <class T>
struct DeviceMatrix {
  void* ptr = nullptr;
  std::size_t bytes = 0;  // of one copy
  explicit DeviceMatrix(const Matrix<float>& X, int64_t copies = 1)
      : bytes(std::size_t(X.size()) * sizeof(T)) {
    const Matrix<T> rounded = X.cast<T>();
    check(cudaMalloc(&ptr, bytes * std::size_t(copies)), "cudaMalloc");
    for (int64_t c = 0; c < copies; ++c)
      check(cudaMemcpy(static_cast<char*>(ptr) + std::size_t(c) * bytes, rounded.data(), bytes,
                       cudaMemcpyHostToDevice),
            "cudaMemcpy to device");
  }
  DeviceMatrix(const DeviceMatrix&) = delete;
  ~DeviceMatrix() { cudaFree(ptr); }
  void read_into(float* out, Index rows, Index cols) const {
    Matrix<T> host(rows, cols);
    check(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    Eigen::Map<Matrix<float>>(out, rows, cols) = host.template cast<float>();
  }
};

// Contiguous (batch 1, heads, rows, d): the (batch, head, row, column) strides.
void contiguous(int64_t (&s)[4], int64_t heads, int64_t rows, int64_t d) {
  s[0] = heads * rows * d, s[1] = rows * d, s[2] = d, s[3] = 1;
}

// Median milliseconds of c.repeats timed calls after c.warmups untimed ones; throws with
// flashlab_last_error()'s message when the library refuses the call.
double time_forward(const flashlab_forward_params& p, const flashlab_runner_call& c) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  std::string refused;
  for (int r = 0; r < c.warmups + c.repeats && refused.empty(); ++r) {
    check(cudaEventRecord(start), "cudaEventRecord");
    if (flashlab_forward(&p) != FLASHLAB_OK) {
      refused = flashlab_last_error();
      break;
    }
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    if (r >= c.warmups) ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!refused.empty()) throw std::invalid_argument(refused);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class T>
double run_typed(const flashlab_runner_call& c) {
  const ConstMap Q(c.q, c.n_q, c.d), K(c.k, c.n_k, c.d), V(c.v, c.n_k, c.d);
  DeviceMatrix<T> q(Q, c.heads), k(K, c.heads), v(V, c.heads),
      o(Matrix<float>::Zero(c.n_q, c.d), c.heads);
  // L is written as in a training forward (the backward pass needs it), so the bytes
  // measured are those of the full forward the simulator's mirrors count.
  DeviceMatrix<float> lse(Matrix<float>::Zero(c.n_q, 1), c.heads);
  flashlab_forward_params p{};
  p.q = q.ptr, p.k = k.ptr, p.v = v.ptr, p.o = o.ptr, p.lse = static_cast<float*>(lse.ptr);
  contiguous(p.q_stride, c.heads, c.n_q, c.d);
  contiguous(p.o_stride, c.heads, c.n_q, c.d);
  contiguous(p.k_stride, c.heads, c.n_k, c.d);
  contiguous(p.v_stride, c.heads, c.n_k, c.d);
  p.batch = 1, p.heads_q = c.heads, p.heads_kv = c.heads, p.n_q = c.n_q, p.n_k = c.n_k, p.d = c.d;
  p.scale = 0;  // the default 1 / sqrt(d)
  p.dtype = c.dtype, p.causal = c.causal, p.kernel = c.kernel;
  const double median = time_forward(p, c);
  o.read_into(c.o, c.n_q, c.d);
  return median;
}

double run(const flashlab_runner_call& c) {
  if (c.repeats < 1 || c.warmups < 0 || c.heads < 1)
    throw std::invalid_argument("repeats and heads must be >= 1, warmups >= 0");
  switch (c.dtype) {
    case FLASHLAB_FP32: return run_typed<float>(c);
    case FLASHLAB_FP16: return run_typed<flashlab::cpu::fp16>(c);
    case FLASHLAB_BF16: return run_typed<flashlab::cpu::bf16>(c);
  }
  throw std::invalid_argument(fmt::format("unknown dtype {}", c.dtype));
}

// text into a caller's buffer of `size` bytes, cut to fit and always terminated.
void copy_text(char* to, std::size_t size, const std::string& text) {
  if (size == 0) return;
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(to, text.data(), n);
  to[n] = '\0';
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int flashlab_runner_version(void) {
  return FLASHLAB_RUNNER_VERSION;
}

__attribute__((visibility("default"))) int flashlab_runner_device(char* description, size_t size) {
  int count = 0;
  std::string text;
  bool present = false;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    text =
        "no CUDA device is present (this flashlab was built with CUDA, but there is no GPU to run "
        "on)";
  } else {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    text = fmt::format("{} ({} SMs)", prop.name, prop.multiProcessorCount);
    present = true;
  }
  copy_text(description, size, text);
  return present ? 1 : 0;
}

__attribute__((visibility("default"))) void flashlab_runner_forward(
    const flashlab_runner_call* call, flashlab_runner_result* result) {
  *result = {};
  try {
    result->median_ms = run(*call);
    result->ran = 1;
  } catch (const std::exception& e) {
    copy_text(result->message, sizeof result->message, e.what());
  }
}

}  // extern "C"

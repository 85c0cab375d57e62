// The GPU runner of a CUDA build: copies the inputs to the device, calls flashlab_forward
// (the C ABI, as any other language would), times it with CUDA events and reads O back.
#include "gpu_runner.hpp"

#include "flashlab/flashlab.h"

#include <cuda_runtime.h>
#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

namespace flashlab::app {

namespace {

using cpu::Index;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

// A device buffer holding X rounded to T, row-major (rows, d).
template <class T>
struct DeviceMatrix {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  explicit DeviceMatrix(const cpu::Matrix<float>& X) : bytes(std::size_t(X.size()) * sizeof(T)) {
    const cpu::Matrix<T> rounded = X.cast<T>();
    check(cudaMalloc(&ptr, bytes), "cudaMalloc");
    check(cudaMemcpy(ptr, rounded.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  DeviceMatrix(const DeviceMatrix&) = delete;
  ~DeviceMatrix() { cudaFree(ptr); }
  cpu::Matrix<float> read(Index rows, Index cols) const {
    cpu::Matrix<T> host(rows, cols);
    check(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host.template cast<float>();
  }
};

int kernel_id(const std::string& name) {
  const auto names = gpu_kernels();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw cpu::InvalidArgument(fmt::format("unknown GPU kernel `{}`: the kernels are naive, scalar, fa2", name));
  return int(it - names.begin());  // FLASHLAB_KERNEL_NAIVE, _SCALAR, _FA2 in order
}

void strides(int64_t (&s)[4], Index rows, Index d) {
  s[0] = rows * d, s[1] = rows * d, s[2] = d, s[3] = 1;  // (batch, head, row, column)
}

template <class T>
GpuRun run_typed(const std::string& kernel, const cpu::Matrix<float>& Q, const cpu::Matrix<float>& K,
                 const cpu::Matrix<float>& V, flashlab_dtype dtype, int causal, int warmups,
                 int repeats) {
  GpuRun run{kernel, false, "", {}, 0};
  DeviceMatrix<T> q(Q), k(K), v(V), o(cpu::Matrix<float>::Zero(Q.rows(), Q.cols()));
  flashlab_forward_params p{};
  p.q = q.ptr, p.k = k.ptr, p.v = v.ptr, p.o = o.ptr, p.lse = nullptr;
  strides(p.q_stride, Q.rows(), Q.cols());
  strides(p.o_stride, Q.rows(), Q.cols());
  strides(p.k_stride, K.rows(), K.cols());
  strides(p.v_stride, V.rows(), V.cols());
  p.batch = 1, p.heads_q = 1, p.heads_kv = 1, p.n_q = Q.rows(), p.n_k = K.rows(), p.d = Q.cols();
  p.scale = 0;  // the default 1 / sqrt(d)
  p.dtype = dtype, p.causal = causal, p.kernel = kernel_id(kernel);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int r = 0; r < warmups + repeats; ++r) {
    check(cudaEventRecord(start), "cudaEventRecord");
    if (flashlab_forward(&p) != FLASHLAB_OK) {
      run.message = flashlab_last_error();
      break;
    }
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    if (r >= warmups) ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!run.message.empty()) return run;
  std::sort(ms.begin(), ms.end());
  run.median_ms = ms[ms.size() / 2];
  run.O = o.read(Q.rows(), Q.cols());
  run.ran = true;
  return run;
}

}  // namespace

GpuStatus gpu_status() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return {false, "no CUDA device is present (this flashlab was built with CUDA, but there is no GPU to run on)"};
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return {true, fmt::format("{} ({} SMs)", prop.name, prop.multiProcessorCount)};
}

std::vector<std::string> gpu_kernels() { return {"naive", "scalar", "fa2"}; }

GpuRun run_gpu_forward(const std::string& kernel, const cpu::Matrix<float>& Q, const cpu::Matrix<float>& K,
                       const cpu::Matrix<float>& V, GpuDtype dtype, int causal, int warmups,
                       int repeats) {
  const GpuStatus status = gpu_status();
  if (!status.available) return {kernel, false, status.description, {}, 0};
  try {
    switch (dtype) {
      case GpuDtype::fp32: return run_typed<float>(kernel, Q, K, V, FLASHLAB_FP32, causal, warmups, repeats);
      case GpuDtype::fp16: return run_typed<cpu::fp16>(kernel, Q, K, V, FLASHLAB_FP16, causal, warmups, repeats);
      case GpuDtype::bf16: return run_typed<cpu::bf16>(kernel, Q, K, V, FLASHLAB_BF16, causal, warmups, repeats);
    }
  } catch (const std::exception& e) {
    return {kernel, false, e.what(), {}, 0};
  }
  return {kernel, false, "unknown dtype", {}, 0};
}

}  // namespace flashlab::app

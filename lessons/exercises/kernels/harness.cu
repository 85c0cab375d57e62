// The harness of the kernel exercises: the plugin's C entry points (plugin_abi.h). For one
// call it copies the host inputs to the GPU, fills the outputs with NaN (so that an entry the
// kernel never writes cannot pass for a result), launches the exercise's kernel with the
// launch facts of kernels/common.cuh, waits for it, and copies the outputs back, saying what
// went wrong if anything did. The kernels themselves come from the files built with it.
#include "kernels/common.cuh"
#include "kernels/plugin_abi.h"

#include <cstdarg>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <vector>

namespace flashlab::kernel_exercises {
namespace {

constexpr int kNanBytes = 0xff;  // every float 0xffffffff: a NaN

void say(flashlab_kx_result* result, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(result->message, sizeof result->message, format, args);
  va_end(args);
}

// The device buffers of one call, freed however the call ends.
class DeviceBuffers {
 public:
  ~DeviceBuffers() {
    for (float* p : owned_) cudaFree(p);
  }
  // A device copy of `count` floats from host (or NaN-filled when host is null); null when
  // CUDA refused, with `error` set.
  float* make(const float* host, std::size_t count, cudaError_t* error) {
    float* device = nullptr;
    const std::size_t bytes = sizeof(float) * (count > 0 ? count : 1);
    if ((*error = cudaMalloc(&device, bytes)) != cudaSuccess) return nullptr;
    owned_.push_back(device);
    *error = host ? cudaMemcpy(device, host, sizeof(float) * count, cudaMemcpyHostToDevice)
                  : cudaMemset(device, kNanBytes, bytes);
    return *error == cudaSuccess ? device : nullptr;
  }

 private:
  std::vector<float*> owned_;
};

// Waits for the launched kernel and reports how it ended; true when it ran to the end.
bool finished(const char* kernel, flashlab_kx_result* result) {
  cudaError_t error = cudaGetLastError();  // a launch the GPU refused
  if (error != cudaSuccess) {
    say(result, "%s could not be launched: %s (%s)", kernel, cudaGetErrorString(error),
        cudaGetErrorName(error));
    return false;
  }
  error = cudaDeviceSynchronize();  // a fault while it ran
  if (error != cudaSuccess) {
    say(result, "%s failed on the GPU: %s (%s)", kernel, cudaGetErrorString(error),
        cudaGetErrorName(error));
    return false;
  }
  return true;
}

bool copy_back(float* host, const float* device, std::size_t count, flashlab_kx_result* result) {
  const cudaError_t error = cudaMemcpy(host, device, sizeof(float) * count, cudaMemcpyDeviceToHost);
  if (error == cudaSuccess) return true;
  say(result, "reading the output back failed: %s", cudaGetErrorString(error));
  return false;
}

bool head_dim_ok(int64_t d, flashlab_kx_result* result) {
  if (d >= 1 && d <= kMaxD) return true;
  say(result, "d = %lld: the kernel exercises take d from 1 to %d (U lives in registers)",
      static_cast<long long>(d), kMaxD);
  return false;
}

void forward(const flashlab_kx_forward_call& c, flashlab_kx_result* result) {
  if (c.exercise != 21 && c.exercise != 22) {
    say(result, "exercise %d has no forward kernel: 21 and 22 have", c.exercise);
    return;
  }
  if (!head_dim_ok(c.d, result)) return;
  constexpr int64_t kMaxRows = 1 << 24;  // far past any case, and no int overflow in n * d
  if (c.n_q < 1 || c.n_k < 1 || c.n_q > kMaxRows || c.n_k > kMaxRows) {
    say(result, "n_q = %lld, n_k = %lld: each must be from 1 to %lld",
        static_cast<long long>(c.n_q), static_cast<long long>(c.n_k),
        static_cast<long long>(kMaxRows));
    return;
  }
  const int n_q = int(c.n_q), n_k = int(c.n_k), d = int(c.d);
  DeviceBuffers buffers;
  cudaError_t error = cudaSuccess;
  ForwardArgs a{};
  a.q = buffers.make(c.q, std::size_t(n_q) * d, &error);
  if (error == cudaSuccess) a.k = buffers.make(c.k, std::size_t(n_k) * d, &error);
  if (error == cudaSuccess) a.v = buffers.make(c.v, std::size_t(n_k) * d, &error);
  if (error == cudaSuccess) a.o = buffers.make(nullptr, std::size_t(n_q) * d, &error);
  if (error == cudaSuccess) a.lse = buffers.make(nullptr, std::size_t(n_q), &error);
  if (error != cudaSuccess) {
    say(result, "preparing the inputs on the GPU failed: %s", cudaGetErrorString(error));
    return;
  }
  a.n_q = n_q, a.n_k = n_k, a.d = d;
  a.scale = 1.0f / std::sqrt(float(d));
  a.causal = c.causal != 0;
  a.diagonal_offset = n_k - n_q;
  const char* name = nullptr;
  if (c.exercise == 21) {
    name = "ex21_scalar_forward_kernel";
    const dim3 grid((n_q + ex21::kBr - 1) / ex21::kBr);
    ex21_scalar_forward_kernel<<<grid, ex21::kBr, ex21::sram_bytes(d)>>>(a);
  } else {
    name = "ex22_pipelined_forward_kernel";
    const dim3 grid((n_q + ex22::kBr - 1) / ex22::kBr);
    error =
        cudaFuncSetAttribute(ex22_pipelined_forward_kernel,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, int(ex22::sram_bytes(d)));
    if (error != cudaSuccess) {
      say(result, "%s could not be given %zu bytes of SRAM: %s", name, ex22::sram_bytes(d),
          cudaGetErrorString(error));
      return;
    }
    ex22_pipelined_forward_kernel<<<grid, ex22::kBr, ex22::sram_bytes(d)>>>(a);
  }
  if (!finished(name, result)) return;
  result->not_written = (c.exercise == 21 ? ex21_not_written() : ex22_not_written()) ? 1 : 0;
  if (!copy_back(c.o, a.o, std::size_t(n_q) * d, result) || !copy_back(c.lse, a.lse, n_q, result))
    return;
  result->ran = 1;
}

void combine(const flashlab_kx_combine_call& c, flashlab_kx_result* result) {
  if (!head_dim_ok(c.d, result)) return;
  constexpr int64_t kMaxSplits = 1 << 16, kMaxRows = 1 << 20;
  if (c.splits < 1 || c.splits > kMaxSplits || c.rows < 1 || c.rows > kMaxRows) {
    say(result, "splits = %lld, rows = %lld: splits must be from 1 to %lld, rows from 1 to %lld",
        static_cast<long long>(c.splits), static_cast<long long>(c.rows),
        static_cast<long long>(kMaxSplits), static_cast<long long>(kMaxRows));
    return;
  }
  const int splits = int(c.splits), rows = int(c.rows), d = int(c.d);
  DeviceBuffers buffers;
  cudaError_t error = cudaSuccess;
  CombineArgs a{};
  a.o_splits = buffers.make(c.o_splits, std::size_t(splits) * rows * d, &error);
  if (error == cudaSuccess)
    a.lse_splits = buffers.make(c.lse_splits, std::size_t(splits) * rows, &error);
  if (error == cudaSuccess) a.o = buffers.make(nullptr, std::size_t(rows) * d, &error);
  if (error == cudaSuccess) a.lse = buffers.make(nullptr, std::size_t(rows), &error);
  if (error != cudaSuccess) {
    say(result, "preparing the inputs on the GPU failed: %s", cudaGetErrorString(error));
    return;
  }
  a.splits = splits, a.rows = rows, a.d = d;
  ex23_combine_kernel<<<rows, ex23::kThreads>>>(a);
  if (!finished("ex23_combine_kernel", result)) return;
  result->not_written = ex23_not_written() ? 1 : 0;
  if (!copy_back(c.o, a.o, std::size_t(rows) * d, result) || !copy_back(c.lse, a.lse, rows, result))
    return;
  result->ran = 1;
}

}  // namespace
}  // namespace flashlab::kernel_exercises

extern "C" {

__attribute__((visibility("default"))) int flashlab_kx_version(void) {
  return FLASHLAB_KERNEL_EXERCISES_VERSION;
}

__attribute__((visibility("default"))) int flashlab_kx_device(char* description, size_t size) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  cudaDeviceProp properties{};
  if (error == cudaSuccess && count > 0 && cudaGetDeviceProperties(&properties, 0) == cudaSuccess) {
    std::snprintf(description, size, "%s", properties.name);
    return 1;
  }
  if (error != cudaSuccess)
    std::snprintf(description, size, "CUDA says: %s", cudaGetErrorString(error));
  else
    std::snprintf(description, size, "CUDA sees no device");
  return 0;
}

__attribute__((visibility("default"))) void flashlab_kx_forward(
    const flashlab_kx_forward_call* call, flashlab_kx_result* result) {
  *result = flashlab_kx_result{};
  flashlab::kernel_exercises::forward(*call, result);
}

__attribute__((visibility("default"))) void flashlab_kx_combine(
    const flashlab_kx_combine_call* call, flashlab_kx_result* result) {
  *result = flashlab_kx_result{};
  flashlab::kernel_exercises::combine(*call, result);
}

}  // extern "C"

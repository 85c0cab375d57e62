// The device side of test_exp2_device.cpp: one thread per argument, software_exp2 as fa3's
// softmax calls it.
#include "exp2_device.hpp"

#include "flashlab/gpu/exp2_software.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace flashlab::gpu::test {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

__global__ void exp2_kernel(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = software_exp2(x[i]);
}

struct Buffer {
  float* ptr = nullptr;
  explicit Buffer(size_t count) { check(cudaMalloc(&ptr, count * sizeof(float)), "cudaMalloc"); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

}  // namespace

std::vector<float> software_exp2_on_device(const std::vector<float>& x) {
  const int n = int(x.size());
  constexpr int kThreads = 256;
  Buffer dx(x.size()), dy(x.size());
  check(cudaMemcpy(dx.ptr, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "copy x");
  exp2_kernel<<<(n + kThreads - 1) / kThreads, kThreads>>>(dx.ptr, dy.ptr, n);
  check(cudaGetLastError(), "launch");
  check(cudaDeviceSynchronize(), "exp2_kernel");
  std::vector<float> y(x.size());
  check(cudaMemcpy(y.data(), dy.ptr, y.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy y");
  return y;
}

}  // namespace flashlab::gpu::test

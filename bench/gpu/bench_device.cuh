// What the GPU benchmark programs of bench/gpu (bench_l2_partitions, bench_l2_rows_in_flight,
// bench_block_log, bench_pipeline_log) share: CUDA's errors as exceptions, the SM count and
// shared memory of device 0, the SM a thread runs on, the dynamic shared memory that lets
// exactly k blocks share an SM, and device arrays of random bf16 inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace flashlab::bench {

// Shared memory a block leaves unasked beside its share of the SM: the 1 KiB the hardware
// reserves per block, and as much again so that one more block never fits.
inline constexpr int kSharedMargin = 2048;

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

__device__ inline unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

struct Device {
  int sms = 0;
  int smem_per_sm = 0;
};

inline Device device_facts() {
  Device d;
  check_cuda(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  check_cuda(cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0),
             "shared memory per SM");
  return d;
}

// Dynamic shared memory that lets exactly `per_sm` blocks of `kernel` share an SM, checked
// with the occupancy calculator.
template <class Kernel>
int shared_bytes_for(Kernel kernel, const Device& dev, int per_sm, int threads) {
  const int bytes = dev.smem_per_sm / per_sm - kSharedMargin;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "cudaFuncSetAttribute");
  int fits = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, kernel, threads, bytes),
             "occupancy");
  if (fits != per_sm)
    throw std::runtime_error(fmt::format("{} bytes of shared memory let {} blocks share an SM, "
                                         "not {}",
                                         bytes, fits, per_sm));
  return bytes;
}

// Uniform bf16 in [-1, 1) from a hash of the index: fresh inputs without a host copy.
static __global__ void fill(__nv_bfloat16* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9E3779B9u ^ uint32_t(i >> 32) ^ seed;
    h ^= h >> 16, h *= 0x85EBCA6Bu, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
    x[i] = __float2bfloat16(float(h >> 8) / float(1 << 23) - 1.0f);
  }
}

template <class T>
T* device_array(int64_t count, const char* what) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, std::size_t(count) * sizeof(T)), what);
  return static_cast<T*>(p);
}

}  // namespace flashlab::bench

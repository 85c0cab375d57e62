// What the GPU benchmark programs of bench/gpu (bench_l2_partitions, bench_l2_rows_in_flight)
// share: CUDA's errors as exceptions, the SM count and shared memory of device 0, the SM a
// thread runs on, and the dynamic shared memory that lets exactly k blocks share an SM.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>

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

}  // namespace flashlab::bench

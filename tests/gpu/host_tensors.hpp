// Host-side pieces the GPU tests share: device buffers, the layouts of a (B, H, N, d)
// tensor in memory, and random tensors rounded to the kernel's dtype.
#pragma once

#include "harness.hpp"

#include "flashlab/cpu/options.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashlab::gpu::test {

using cpu::Matrix;

inline constexpr int kRowPad = 8;         // padding of Layout::bhsd_padded, a multiple of 8 for fa2
inline constexpr uint8_t kPoison = 0xff;  // all-ones bytes are a NaN in fp32, fp16 and bf16

inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Strides (batch, head, row, column) and the element count of a (B, H, N, d) tensor.
struct Geometry {
  int64_t stride[4];
  int64_t elems;
  int64_t at(int b, int h, int n, int k) const {
    return b * stride[0] + h * stride[1] + n * stride[2] + k;
  }
};

inline Geometry geometry(Layout layout, int B, int H, int N, int d) {
  switch (layout) {
    case Layout::bshd: return {{int64_t(N) * H * d, d, int64_t(H) * d, 1}, int64_t(B) * N * H * d};
    case Layout::bhsd_padded: {
      const int64_t row = d + kRowPad;
      return {{H * N * row, N * row, row, 1}, B * H * N * row};
    }
    case Layout::bhsd: break;
  }
  return {{int64_t(H) * N * d, int64_t(N) * d, d, 1}, int64_t(B) * H * N * d};
}

inline cpu::Causal causal_of(flashlab_causal c) {
  switch (c) {
    case FLASHLAB_CAUSAL_TOP_LEFT: return cpu::Causal::top_left;
    case FLASHLAB_CAUSAL_BOTTOM_RIGHT: return cpu::Causal::bottom_right;
    case FLASHLAB_CAUSAL_NONE: break;
  }
  return cpu::Causal::none;
}

// One tensor on the host, in its layout, with the values rounded to In.
template <class In>
struct HostTensor {
  Geometry g;
  int d;
  std::vector<In> data;

  HostTensor(Layout layout, int B, int H, int N, int d_, std::mt19937_64* rng)
      : g(geometry(layout, B, H, N, d_)), d(d_), data(g.elems, In(0)) {
    std::normal_distribution<double> normal(0.0, 1.0);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int n = 0; n < N; ++n)
          for (int k = 0; k < d; ++k) data[g.at(b, h, n, k)] = In(normal(*rng));
  }

  Matrix<In> head(int b, int h, int N) const {
    Matrix<In> M(N, d);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < d; ++k) M(n, k) = data[g.at(b, h, n, k)];
    return M;
  }
};

}  // namespace flashlab::gpu::test

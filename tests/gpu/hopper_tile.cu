// The device half of test_hopper_tile.cpp: one block, one warpgroup, one tile of each
// product, using the wrappers exactly as 06_fa3.cu uses them (see hopper_tile.hpp).
#include "hopper_tile.hpp"

#include "hopper/mbarrier.cuh"
#include "hopper/tma.cuh"
#include "hopper/wgmma.cuh"

#include <stdexcept>
#include <string>

namespace flashlab::gpu::test {
namespace {

using T = __nv_bfloat16;
constexpr int kSlab = fa3::kSlab;
constexpr int kThreads = fa3::kWarpgroupThreads;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

template <int D>
struct TileSram {
  static constexpr int kAElems = kTileM * D, kBElems = kTileN * D;
  static constexpr size_t kBytes =
      fa3::kSwizzleAtom * 2 + sizeof(T) * (kAElems + 2 * kBElems);  // slack + barrier atom
};

// Row `row`, column `col` of the (64, N) accumulator element i of thread t (wgmma.cuh).
__device__ __forceinline__ int acc_row(int t, int i) {
  return (t / kWarpSize) * 16 + (t % kWarpSize) / 4 + ((i % 4) / 2) * 8;
}
__device__ __forceinline__ int acc_col(int t, int i) { return (i / 4) * 8 + (t % 4) * 2 + (i % 2); }

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    tile_kernel(const __grid_constant__ CUtensorMap mA, const __grid_constant__ CUtensorMap mB,
                const __grid_constant__ CUtensorMap mV, float* gS, float* gU) {
  extern __shared__ __align__(128) unsigned char raw[];
  const uint32_t pad =
      (fa3::kSwizzleAtom - ptx::sram_address(raw) % fa3::kSwizzleAtom) % fa3::kSwizzleAtom;
  uint64_t* bar = reinterpret_cast<uint64_t*>(raw + pad);
  T* sA = reinterpret_cast<T*>(raw + pad + fa3::kSwizzleAtom);  // (64, D) in slabs
  T* sB = sA + TileSram<D>::kAElems;                            // (128, D) in slabs
  T* sV = sB + TileSram<D>::kBElems;                            // (128, D) in slabs
  const int t = threadIdx.x;
  if (t == 0) {
    hopper::mbarrier_init(bar, 1);
    hopper::fence_barrier_init();
  }
  __syncthreads();
  if (t == 0) {
    hopper::mbarrier_arrive_expect_tx(
        bar, sizeof(T) * (TileSram<D>::kAElems + 2 * TileSram<D>::kBElems));
    for (int s = 0; s < D / kSlab; ++s) {
      hopper::tma_load_4d(sA + s * kTileM * kSlab, &mA, bar, s * kSlab, 0, 0, 0);
      hopper::tma_load_4d(sB + s * kTileN * kSlab, &mB, bar, s * kSlab, 0, 0, 0);
      hopper::tma_load_4d(sV + s * kTileN * kSlab, &mV, bar, s * kSlab, 0, 0, 0);
    }
  }
  hopper::mbarrier_wait(bar, 0);

  float rS[kTileN / 2];
  hopper::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / hopper::kWgmmaK; ++kk) {
    const int slab = kk * hopper::kWgmmaK / kSlab, col = kk * hopper::kWgmmaK % kSlab;
    hopper::wgmma_ss<T, kTileN>(rS, hopper::descriptor_k_major(sA + slab * kTileM * kSlab + col),
                                hopper::descriptor_k_major(sB + slab * kTileN * kSlab + col),
                                /*scale_d=*/kk > 0);
  }
  hopper::wgmma_commit();
  hopper::wgmma_wait<0>();
  hopper::fence_registers(rS);
#pragma unroll
  for (int i = 0; i < kTileN / 2; ++i) gS[acc_row(t, i) * kTileN + acc_col(t, i)] = rS[i];

  uint32_t rP[kTileN / 16][4];  // bf16(S) as A fragments, 16 keys each
#pragma unroll
  for (int kk = 0; kk < kTileN / 16; ++kk) {
    rP[kk][0] = ptx::pack2<T>(rS[8 * kk + 0], rS[8 * kk + 1]);
    rP[kk][1] = ptx::pack2<T>(rS[8 * kk + 2], rS[8 * kk + 3]);
    rP[kk][2] = ptx::pack2<T>(rS[8 * kk + 4], rS[8 * kk + 5]);
    rP[kk][3] = ptx::pack2<T>(rS[8 * kk + 6], rS[8 * kk + 7]);
  }
  float rU[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) rU[i] = 0.0f;
  hopper::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTileN / hopper::kWgmmaK; ++kk)
    hopper::wgmma_rs<T, D>(rU, rP[kk],
                           hopper::descriptor_mn_major(sV + kk * hopper::kWgmmaK * kSlab, kTileN),
                           /*scale_d=*/1);
  hopper::wgmma_commit();
  hopper::wgmma_wait<0>();
  hopper::fence_registers(rU);
#pragma unroll
  for (int i = 0; i < D / 2; ++i) gU[acc_row(t, i) * D + acc_col(t, i)] = rU[i];
}

struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes) { check(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

template <int D>
TileProducts run(const std::vector<uint16_t>& A, const std::vector<uint16_t>& B,
                 const std::vector<uint16_t>& V) {
  Buffer dA(A.size() * 2), dB(B.size() * 2), dV(V.size() * 2);
  Buffer dS(sizeof(float) * kTileM * kTileN), dU(sizeof(float) * kTileM * D);
  check(cudaMemcpy(dA.ptr, A.data(), A.size() * 2, cudaMemcpyHostToDevice), "copy A");
  check(cudaMemcpy(dB.ptr, B.data(), B.size() * 2, cudaMemcpyHostToDevice), "copy B");
  check(cudaMemcpy(dV.ptr, V.data(), V.size() * 2, cudaMemcpyHostToDevice), "copy V");
  // Row-major (rows, D): row stride D, one head, one batch.
  const auto map = [](const void* p, int rows) {
    return hopper::make_tensor_map("tile", p, Strides{int64_t(rows) * D, int64_t(rows) * D, D}, 1,
                                   1, rows, D, FLASHLAB_BF16, rows)
        .map;
  };
  const CUtensorMap mA = map(dA.ptr, kTileM), mB = map(dB.ptr, kTileN), mV = map(dV.ptr, kTileN);
  check(cudaFuncSetAttribute(tile_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(TileSram<D>::kBytes)),
        "shared memory attribute");
  tile_kernel<D><<<1, kThreads, TileSram<D>::kBytes>>>(mA, mB, mV, static_cast<float*>(dS.ptr),
                                                       static_cast<float*>(dU.ptr));
  check(cudaGetLastError(), "launch");
  check(cudaDeviceSynchronize(), "tile_kernel");
  TileProducts out{std::vector<float>(kTileM * kTileN), std::vector<float>(kTileM * D)};
  check(cudaMemcpy(out.S.data(), dS.ptr, out.S.size() * sizeof(float), cudaMemcpyDeviceToHost),
        "copy S");
  check(cudaMemcpy(out.U.data(), dU.ptr, out.U.size() * sizeof(float), cudaMemcpyDeviceToHost),
        "copy U");
  return out;
}

std::vector<uint8_t> map_bytes(const void* p) {
  constexpr int kRows = 128, kD = 128;
  const CUtensorMap map = hopper::make_tensor_map("tile", p, Strides{kRows * kD, kRows * kD, kD}, 1,
                                                  1, kRows, kD, FLASHLAB_BF16, kRows)
                              .map;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&map);
  return std::vector<uint8_t>(bytes, bytes + sizeof map);
}

}  // namespace

EncodedMaps encoded_tensor_maps() {
  Buffer first(sizeof(T) * 128 * 128), second(sizeof(T) * 128 * 128);
  return EncodedMaps{map_bytes(first.ptr), map_bytes(first.ptr), map_bytes(second.ptr)};
}

TileProducts hopper_tile_products(int d, const std::vector<uint16_t>& A,
                                  const std::vector<uint16_t>& B, const std::vector<uint16_t>& V) {
  if (d == 64) return run<64>(A, B, V);
  if (d == 128) return run<128>(A, B, V);
  throw std::runtime_error("hopper_tile_products takes d = 64 or 128, not " + std::to_string(d));
}

}  // namespace flashlab::gpu::test

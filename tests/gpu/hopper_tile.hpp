// One tile through fa3's PTX wrappers, on the device: TMA tensor maps (hopper/tma.cuh) load
// row-major bf16 matrices into swizzled SRAM, and wgmma (hopper/wgmma.cuh) multiplies them
// through its descriptors, as 06_fa3.cu does:
//   S (64, 128) = A (64, d) B (128, d)^T        wgmma_ss, both operands K-major
//   U (64, d)   = bf16(S) (64, 128) V (128, d)  wgmma_rs, S from registers, V MN-major
// Matrices are bf16 bit patterns on the host, row-major; S and U come back in fp32.
#pragma once

#include <cstdint>
#include <vector>

namespace flashlab::gpu::test {

inline constexpr int kTileM = 64;   // rows of A, S and U: one warpgroup's wgmma M
inline constexpr int kTileN = 128;  // rows of B and V: the keys of one KV tile

struct TileProducts {
  std::vector<float> S;  // (64, 128)
  std::vector<float> U;  // (64, d)
};

// d is 64 or 128. Throws std::runtime_error on a CUDA error.
TileProducts hopper_tile_products(int d, const std::vector<uint16_t>& A,
                                  const std::vector<uint16_t>& B, const std::vector<uint16_t>& V);

// The bytes of the CUtensorMaps that hopper::make_tensor_map builds for a (128, 128) bf16
// matrix at two device addresses, the first one twice. The descriptor is opaque, but it
// encodes the address: the same tensor must give the same bytes, another address other bytes.
struct EncodedMaps {
  std::vector<uint8_t> first, first_again, second;
};
EncodedMaps encoded_tensor_maps();

}  // namespace flashlab::gpu::test

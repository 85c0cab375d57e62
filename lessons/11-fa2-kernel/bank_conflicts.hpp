// Shared-memory bank conflicts of fa2's SRAM reads and writes, counted on the model of 32
// banks of 4 bytes: byte address a lies in bank (a / 4) % 32, and a request is served in
// wavefronts, each of which takes one 4-byte word from every bank (lanes reading the same
// word share it). A request whose lanes need w different words from one bank takes w
// wavefronts. 16-byte accesses (ldmatrix rows, cp.async chunks) are served 8 lanes at a time:
// one phase of ldmatrix.x4 is one 8 x 8 matrix, 8 rows of 16 bytes = 128 bytes, which at best
// is one wavefront.
//
// The addresses are 03_fa2.cu's own: the lane rows of fragments.hpp, placed in the tile by the
// kernel's swizzle (flashlab/gpu/swizzle.hpp), or without it (chunk c at chunk c) to compare.
#pragma once

#include "11-fa2-kernel/fragments.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace flashlab::app {

inline constexpr int kBanks = 32;
inline constexpr int kBankBytes = 4;

// The bank of a byte address.
constexpr int bank_of(std::int64_t byte_address) {
  return int((byte_address / kBankBytes) % kBanks);
}

// Wavefronts one phase needs: each lane reads bytes_each bytes from its address (a multiple of
// 4 bytes, aligned to it). Throws std::invalid_argument for bytes_each not a positive multiple
// of 4 or an address not aligned to 4.
int wavefronts(std::span<const std::int64_t> addresses, int bytes_each);

// One kind of SRAM access of a warp during one KV tile, counted over all its instructions.
struct AccessCount {
  std::string what;
  int instructions = 0;  // per warp and KV tile
  int phases = 0;        // 8-lane phases of 16 bytes, over those instructions
  int wavefronts_swizzled = 0, wavefronts_plain = 0;
  int worst_swizzled = 0, worst_plain = 0;  // wavefronts of the worst phase
};

// The byte addresses (relative to the tile) of one phase: 8 lanes, their logical (row, chunk)
// in a tile of row_elems 16-bit elements a row, swizzled or not.
std::vector<std::int64_t> phase_addresses(std::span<const LaneRow> lanes, int row_elems,
                                          bool swizzled);

// fa2's ldmatrix reads of Q, K and V, and its cp.async writes of a K or V tile, for one warp
// and one KV tile, at head dimension d with KV tiles of Bc keys, Br query rows per block and
// `threads` threads per block (kernel_info.hpp's figures).
std::vector<AccessCount> fa2_sram_accesses(int d, int Br, int Bc, int threads);

}  // namespace flashlab::app

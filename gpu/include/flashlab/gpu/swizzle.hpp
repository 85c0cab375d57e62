// Where an element of a tensor-core kernel's SRAM tile lives: the swizzle, written once for
// the kernels (gpu/kernels/sram_tiles.cuh) and for host code (lesson 11 counts the bank
// conflicts it removes). Plain C++17: it builds without CUDA.
//
// A tile is (rows, row_elems) 16-bit elements, row-major, cut into 16-byte chunks of
// kChunk = 8 elements. Chunk c of row r is stored at chunk c ^ (r % 8) of the same row. One
// phase of ldmatrix reads one chunk from each of 8 consecutive rows at the same logical
// chunk c; unswizzled, with rows of 128 bytes or a multiple, those 8 chunks sit on the same
// 4 of the 32 four-byte banks (an 8-way conflict); swizzled, they sit on chunks c ^ 0 ...
// c ^ 7, eight different ones: all 32 banks once, no conflict.
#pragma once

#include "flashlab/gpu/host_device.hpp"

namespace flashlab::gpu::swizzle {

inline constexpr int kChunkBytes = 16;  // one cp.async, one row address of ldmatrix
inline constexpr int kChunk = 8;        // 16-bit elements per chunk
inline constexpr int kSwizzleRows = 8;  // an ldmatrix phase reads 8 rows at once

// The chunk where logical chunk c of row r is stored.
FLASHLAB_HOST_DEVICE constexpr int stored_chunk(int r, int c) { return c ^ (r % kSwizzleRows); }

// Element offset of logical chunk c of row r in a swizzled tile of row_elems elements a row.
FLASHLAB_HOST_DEVICE constexpr int offset(int row_elems, int r, int c) {
  return r * row_elems + stored_chunk(r, c) * kChunk;
}

}  // namespace flashlab::gpu::swizzle

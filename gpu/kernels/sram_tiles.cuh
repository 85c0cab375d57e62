// Tiles in SRAM and the warp-level products the backward kernels are built from, each
// written once. A tile is (rows, ROW) elements of a 16-bit type, row-major, swizzled: the
// 16-byte chunk c of row r lives at chunk c ^ (r % 8), so the 8 rows one ldmatrix reads fall
// in 8 different bank groups (the index function: flashlab/gpu/swizzle.hpp, which host code
// includes too). 03_fa2.cu (the forward) and the backward kernels share them.
// Every product is one warp's m16 slice: C (16, N) fp32 in mma C fragments,
// rC[N / 8][4] (ptx.cuh spells out which thread holds which element).
#pragma once

#include "ptx.cuh"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/swizzle.hpp"

#include <cstdint>

namespace flashlab::gpu::tiles {

constexpr int kMmaM = 16;        // rows of one mma.sync m16n8k16 tile
using swizzle::kChunk;        // 16-bit elements per 16-byte chunk
using swizzle::kSwizzleRows;  // an ldmatrix reads 8 rows at once

// Element offset of 16-byte chunk c of row r in a swizzled (rows, ROW) tile.
template <int ROW>
__device__ __forceinline__ int swizzled(int r, int c) {
  return swizzle::offset(ROW, r, c);
}

// Starts copying rows [row0, row0 + ROWS) of a (n_rows, D) matrix gX in HBM (rows
// row_stride elements apart) into the swizzled tile sX, 16 bytes per cp.async, by all
// THREADS threads; rows at or past n_rows are zero-filled and never read.
template <class T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(T* sX, const T* gX, int64_t row_stride, int row0,
                                          int n_rows) {
  constexpr int kChunksPerRow = D / kChunk;
  constexpr int kRowsPerPass = THREADS / kChunksPerRow;
  static_assert(kRowsPerPass % kSwizzleRows == 0 && ROWS % kRowsPerPass == 0);
  const int r = threadIdx.x / kChunksPerRow, c = threadIdx.x % kChunksPerRow;
  const T* src = gX + (row0 + r) * row_stride + c * kChunk;
  T* dst = sX + swizzled<D>(r, c);
#pragma unroll
  for (int i = 0; i < ROWS / kRowsPerPass; ++i) {
    const bool inside = row0 + r + i * kRowsPerPass < n_rows;
    ptx::cp_async_16(dst + i * kRowsPerPass * D, inside ? src : gX, inside);
    src += kRowsPerPass * row_stride;
  }
}

// One warp stores the m16n8 C fragments of its (16, D) slice, rounded to T, into rows
// [row0, row0 + 16) of the swizzled tile sX: lane (g, t) writes the 32-bit pair (2t, 2t + 1)
// of rows g and g + 8 of every n8 tile. An n8 tile is one 16-byte chunk, so the 8 rows of
// one store sit in chunks c ^ 0 ... c ^ 7: all 32 banks once, no conflict.
template <class T, int D>
__device__ __forceinline__ void store_fragments(T* sX, int row0, const float (&rC)[D / 8][4],
                                                float scale_lo, float scale_hi, int lane) {
  // row0 % 8 == 0, so rows g and g + 8 both keep chunk dt at dt ^ g, and with a row a power
  // of two of at least 8 chunks, swizzled<D>(row0 + g, dt) + pair = lo ^ (dt * kChunk): one
  // address for all the tile's stores, each a constant XOR of it.
  static_assert(D % (kSwizzleRows * kChunk) == 0 && (D & (D - 1)) == 0,
                "rows of a power of two of chunks, at least 8");
  const int g = lane / 4;
  const int lo = (row0 + g) * D + g * kChunk + (lane % 4) * 2, hi = lo + 8 * D;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    *reinterpret_cast<uint32_t*>(sX + (lo ^ (dt * kChunk))) =
        ptx::pack2<T>(rC[dt][0] * scale_lo, rC[dt][1] * scale_lo);
    *reinterpret_cast<uint32_t*>(sX + (hi ^ (dt * kChunk))) =
        ptx::pack2<T>(rC[dt][2] * scale_hi, rC[dt][3] * scale_hi);
  }
}

// Rows of D 16-bit elements one warp instruction of store_rows writes, a chunk a lane.
template <int D>
inline constexpr int kRowsPerStore = kWarpSize / (D / kChunk);

// One warp copies rows [row0, row0 + ROWS) of the swizzled tile sX to rows [grow0, grow0 +
// ROWS) of gX in HBM (rows row_stride elements apart), whole rows of 16-byte stores: each
// instruction writes kRowsPerStore<D> rows, every 32-byte sector in full (the store pattern
// kernel_info.hpp calls staged_row_store). Rows at or past n_rows are not written. The
// reverse of load_tile's path; the caller makes the rows visible to the warp (__syncwarp)
// first.
template <class T, int D, int ROWS>
__device__ __forceinline__ void store_rows(T* gX, int64_t row_stride, int grow0, int n_rows,
                                           const T* sX, int row0, int lane) {
  constexpr int kChunksPerRow = D / kChunk;
  static_assert(ROWS % kRowsPerStore<D> == 0, "every store writes whole rows");
  const int r = lane / kChunksPerRow, c = lane % kChunksPerRow;
#pragma unroll
  for (int i = 0; i < ROWS; i += kRowsPerStore<D>) {
    const int row = row0 + i + r, grow = grow0 + i + r;
    if (grow < n_rows)
      *reinterpret_cast<uint4*>(gX + grow * row_stride + c * kChunk) =
          *reinterpret_cast<const uint4*>(sX + swizzled<D>(row, c));
  }
}

// The swizzled chunk offsets of the row an ldmatrix lane addresses. Every row a lane hands
// to ldmatrix has row % 8 == lane % 8, so chunk 2jj + low sits at
// (jj / 4) * 64 + ((2 (jj % 4) + low) ^ lane % 8) * 8 elements.
struct LaneChunks {
  int offset[4];
  __device__ __forceinline__ LaneChunks(int lane, int low) {
#pragma unroll
    for (int j = 0; j < 4; ++j) offset[j] = swizzle::stored_chunk(lane, 2 * j + low) * kChunk;
  }
  __device__ __forceinline__ int at(int jj) const {
    return (jj / 4) * kSwizzleRows * kChunk + offset[jj % 4];
  }
};

template <int N>
__device__ __forceinline__ void zero(float (&rC)[N / 8][4]) {
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt) rC[nt][0] = rC[nt][1] = rC[nt][2] = rC[nt][3] = 0.0f;
}

// C (16, N) += A B^T: A is rows [a_row0, a_row0 + 16) of the tile sA (rows, K), B is rows
// [0, N) of the tile sB (N, K). Both come through plain ldmatrix, as Q and K do in the
// forward's S = Q K^T. a_row0 is a multiple of 16.
//   S^T = K_j Q_i^T, dP^T = V_j dO_i^T (main kernel);  S = Q_i K_j^T, dP = dO_i V_j^T (dQ).
template <class T, int K, int N>
__device__ __forceinline__ void mma_a_bt(float (&rC)[N / 8][4], const T* sA, int a_row0,
                                         const T* sB, int lane) {
  const int a_row = a_row0 + lane % 16;            // lanes 16..31: the upper 8 of k16
  const int b_row = (lane % 8) + (lane / 16) * 8;  // lanes 16..31: the next n8 tile
  const LaneChunks a_chunks(lane, lane / 16), b_chunks(lane, (lane / 8) % 2);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t rA[4];  // (16, 16) of A
    ptx::ldmatrix_x4(rA, sA + a_row * K + a_chunks.at(kk));
#pragma unroll
    for (int np = 0; np < N / 16; ++np) {
      uint32_t rB[4];  // B fragments of n-tiles 2np and 2np + 1
      ptx::ldmatrix_x4(rB, sB + (np * 16 + b_row) * K + b_chunks.at(kk));
      ptx::mma_16816<T>(rC[2 * np], rA, rB[0], rB[1]);
      ptx::mma_16816<T>(rC[2 * np + 1], rA, rB[2], rB[3]);
    }
  }
}

// The A fragment of k-slice kk of a (16, K) matrix held as C fragments rA[K / 8][4]: a C
// fragment's (g, 2t..2t+1) is exactly an A fragment's, so it is only rounded to T and
// packed (as the forward feeds W to W V).
template <class T, int K>
__device__ __forceinline__ void a_from_c(uint32_t (&rA)[4], const float (&rC)[K / 8][4], int kk) {
  rA[0] = ptx::pack2<T>(rC[2 * kk][0], rC[2 * kk][1]);
  rA[1] = ptx::pack2<T>(rC[2 * kk][2], rC[2 * kk][3]);
  rA[2] = ptx::pack2<T>(rC[2 * kk + 1][0], rC[2 * kk + 1][1]);
  rA[3] = ptx::pack2<T>(rC[2 * kk + 1][2], rC[2 * kk + 1][3]);
}

// The same for a whole (16, K) matrix: rA[kk] is k-slice kk, (16, 16), packed in T.
template <class T, int K>
__device__ __forceinline__ void pack_a(uint32_t (&rA)[K / 16][4], const float (&rC)[K / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) a_from_c<T, K>(rA[kk], rC, kk);
}

// Element e of n-tile nt of a C fragment, read back from its packed A fragments (pack_a):
// n-tile nt is half nt % 2 of k-slice nt / 2, rows g (e < 2) and g + 8 (e >= 2).
template <class T, int K>
__device__ __forceinline__ float2 c_from_a(const uint32_t (&rA)[K / 16][4], int nt, int row8) {
  return ptx::unpack2<T>(rA[nt / 2][(nt % 2) * 2 + row8]);
}

// One k-slice of C (16, N) += A B with B the tile sB (K, N), stored (k, n) and so read
// through ldmatrix.trans, as V in the forward's U += W V.
template <class T, int N>
__device__ __forceinline__ void mma_slice_b(float (&rC)[N / 8][4], const uint32_t (&rA)[4],
                                            const T* sB, int kk, int lane) {
  const int b_row = (lane % 8) + ((lane / 8) % 2) * 8;  // lanes 8..15, 24..31: k 8..15
  const LaneChunks b_chunks(lane, lane / 16);           // lanes 16..31: the next n8 tile
#pragma unroll
  for (int np = 0; np < N / 16; ++np) {
    uint32_t rB[4];
    ptx::ldmatrix_x4_trans(rB, sB + (kk * 16 + b_row) * N + b_chunks.at(np));
    ptx::mma_16816<T>(rC[2 * np], rA, rB[0], rB[1]);
    ptx::mma_16816<T>(rC[2 * np + 1], rA, rB[2], rB[3]);
  }
}

// C (16, N) += A B: A (16, K) is held in registers as C fragments (rounded to T here), B is
// the tile sB (K, N).
//   dK += dS^T Q_i (main kernel);  dQ += dS K_j (dQ kernel).
template <class T, int K, int N>
__device__ __forceinline__ void mma_c_b(float (&rC)[N / 8][4], const float (&rA_c)[K / 8][4],
                                        const T* sB, int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t rA[4];
    a_from_c<T, K>(rA, rA_c, kk);
    mma_slice_b<T, N>(rC, rA, sB, kk, lane);
  }
}

// The same with A already packed (pack_a): dV += P^T dO_i (main kernel).
template <class T, int K, int N>
__device__ __forceinline__ void mma_a_b(float (&rC)[N / 8][4], const uint32_t (&rA)[K / 16][4],
                                        const T* sB, int lane) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) mma_slice_b<T, N>(rC, rA[kk], sB, kk, lane);
}

// The A fragments of columns [a_col0, a_col0 + 16) of A^T, where the tile sA (K, M) holds
// A^T: rA[kk] is k-slice kk, (16, 16), read through ldmatrix.trans. a_col0 is a multiple of
// 16. ldmatrix.trans hands lane (g, t) the elements (2t, g), (2t + 1, g) of each stored
// 8x8 tile, which is (g, 2t..2t+1) of the transposed one, an A fragment's layout.
//   dS (16 query rows, Bc keys) from sdS = dS^T (Bc, Br) for dQ += dS K_j (main kernel).
template <class T, int K, int M>
__device__ __forceinline__ void load_a_transposed(uint32_t (&rA)[K / 16][4], const T* sA,
                                                  int a_col0, int lane) {
  const int row = (lane % 8) + (lane / 16) * 8;  // lanes 16..31: k 8..15 (a2, a3)
  // Chunk a_col0 / 8 + (lanes 8..15, 24..31: m 8..15, for a1 and a3), swizzled by the row.
  // Written out rather than LaneChunks::at: a_col0 is not known at compile time, and a
  // run-time index into LaneChunks' array would put it in local memory.
  const int chunk = a_col0 / kChunk + (lane / 8) % 2;
  const int col = swizzle::stored_chunk(lane, chunk) * kChunk;
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    ptx::ldmatrix_x4_trans(rA[kk], sA + (kk * 16 + row) * M + col);
}

}  // namespace flashlab::gpu::tiles

// TMA, the Tensor Memory Accelerator: a copy engine that moves a whole tile between HBM and
// SRAM from one instruction of one thread. The host describes the tensor once (a
// CUtensorMap: base address, sizes, byte strides, the tile's box, the SRAM swizzle); the
// kernel then names a tile by its coordinates and an mbarrier on which the bytes land.
// Rows past the tensor's end are filled with zeros in SRAM and never read from HBM, which
// gives the ragged last tile for free.
//
// A tensor of the ABI, (batch, heads, N, d) with strides in elements, becomes a 4-d map
// (d, N, heads, batch) with byte strides (row, head, batch): BHSD and BSHD alike, no copy.
// The box is (64, rows, 1, 1): one slab of 64 elements (128 bytes) of d, `rows` rows. In
// SRAM the engine writes it in the 128-byte swizzle: row r at byte 128 r, its 16-byte chunk
// c at chunk c ^ (r % 8); a tile with d = 128 is two such slabs, one after the other.
// PTX ISA: "cp.async.bulk.tensor"; CUDA driver API: cuTensorMapEncodeTiled.
#pragma once

#include "../common.cuh"
#include "../ptx.cuh"

#include <cuda.h>  // CUtensorMap and its enums only: the encoder comes from the runtime

#include <cstdint>

namespace flashlab::gpu::hopper {

inline constexpr int kTmaSlab = fa3::kSlab;                 // elements of d per box
inline constexpr int64_t kTmaStrideAlign = 16;              // bytes: every global stride
inline constexpr int64_t kTmaMaxStride = int64_t(1) << 40;  // bytes: strides must be below

// Copies the box at (d0, row0, head, batch) of `map` into SRAM at `dst`; its bytes complete
// a transaction on `bar` (which someone must have told to expect them).
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int d0, int row0, int head, int batch) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(ptx::sram_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(d0), "r"(row0), "r"(head), "r"(batch),
      "r"(ptx::sram_address(bar))
      : "memory");
}

// The other way: copies the SRAM box at `src` (laid out as a load of the same map would have
// written it, 128-byte swizzle included) to (d0, row0, head, batch) of `map`. Rows past the
// tensor's end are not written. The copy runs asynchronously, in the thread's bulk group:
// tma_store_commit closes the group, tma_store_wait_read waits until at most `kPending` of
// the thread's groups still read SRAM (their sources may then be overwritten), tma_store_wait
// until at most `kPending` are incomplete. The SRAM must have been written before the copy
// was issued and made visible to the engine by fence_proxy_async_shared.
// PTX ISA: "cp.async.bulk.tensor" (.global.shared::cta), "cp.async.bulk.wait_group".
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* src, int d0,
                                             int row0, int head, int batch) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], "
      "[%5];\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(d0), "r"(row0), "r"(head), "r"(batch), "r"(ptx::sram_address(src))
      : "memory");
}
__device__ __forceinline__ void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
template <int kPending>
__device__ __forceinline__ void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}
// Makes this thread's ordinary SRAM stores visible to the asynchronous proxy (TMA, wgmma).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Fetches the descriptor into the engine's cache before the first copy uses it.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// A tensor of the ABI as TMA sees it. A head or batch stride of 0 (every head, or every
// batch, reads the same memory: an input broadcast) is no TMA stride; such a dimension is
// described with extent 1, and the kernel multiplies its coordinate by its step, 0.
struct TensorMap {
  CUtensorMap map;
  int head_step;   // 1, or 0 for a broadcast head dimension
  int batch_step;  // 1, or 0 for a broadcast batch dimension
};

// The host side: describes one (batch, heads, rows, d) tensor of the ABI for TMA copies of
// boxes (kTmaSlab, box_rows), loads or stores. Throws FLASHLAB_ERROR_MISALIGNED for strides TMA
// cannot describe, FLASHLAB_ERROR_UNSUPPORTED for a broadcast row (row stride 0), and
// FLASHLAB_ERROR_CUDA when the driver refuses the map.
TensorMap make_tensor_map(const char* name, const void* base, const Strides& strides, int batch,
                          int heads, int rows, int d, flashlab_dtype dtype, int box_rows);

}  // namespace flashlab::gpu::hopper

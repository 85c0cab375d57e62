// Where and when each block of a kernel ran: its SM (%smid) and its start and end
// (%globaltimer, ns), one entry a block, for the grid model's replay of a real grid
// (sim::GridSchedule::logged). Only bench programs that define FLASHLAB_BLOCK_LOG before
// including a kernel's source build it in (bench/gpu/block_log.cu); the library's kernels
// compile without it, instruction for instruction as before.
//
// A kernel takes it in two lines: FLASHLAB_BLOCK_LOG_BEGIN at its top and
// FLASHLAB_BLOCK_LOG_END after its last store. Thread 0 writes the entry of its block (linear
// id x + gridDim.x (y + gridDim.y z)) into g_entries, an array of one entry a block that the
// host points it at (cudaMemcpyToSymbol); null, nothing is written.
#pragma once

#ifdef FLASHLAB_BLOCK_LOG

#include <cstdint>

namespace flashlab::gpu::block_log {

struct Entry {
  uint64_t start = 0, end = 0;  // %globaltimer at the block's first and last instruction
  uint32_t sm = 0, padding = 0;  // padding: the entry a whole number of 8-byte words
};

// One entry a block of the logged launch; set from the host (cudaMemcpyToSymbol).
__device__ Entry* g_entries = nullptr;

__device__ __forceinline__ uint64_t now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void write(uint64_t start) {
  if (threadIdx.x != 0 || g_entries == nullptr) return;
  uint32_t sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  const uint64_t block =
      blockIdx.x + uint64_t(gridDim.x) * (blockIdx.y + uint64_t(gridDim.y) * blockIdx.z);
  g_entries[block] = {start, now(), sm, 0};
}

}  // namespace flashlab::gpu::block_log

#define FLASHLAB_BLOCK_LOG_BEGIN const uint64_t flashlab_block_log_start = ::flashlab::gpu::block_log::now()
#define FLASHLAB_BLOCK_LOG_END ::flashlab::gpu::block_log::write(flashlab_block_log_start)

#else

#define FLASHLAB_BLOCK_LOG_BEGIN static_cast<void>(0)
#define FLASHLAB_BLOCK_LOG_END static_cast<void>(0)

#endif

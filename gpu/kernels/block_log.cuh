// Where and when each block of a kernel ran: its SM (%smid) and its start and end
// (%globaltimer, ns), one entry a block, for the grid model's replay of a real grid
// (sim::GridSchedule::logged). Only bench programs that define FLASHLAB_BLOCK_LOG before
// including a kernel's source build it in (bench/gpu/block_log.cu); the library's kernels
// compile without it, instruction for instruction as before.
//
// A kernel takes it in two lines: FLASHLAB_BLOCK_LOG_BEGIN at its top and
// FLASHLAB_BLOCK_LOG_END after its last store. Thread 0 writes the entry of its block (linear
// id x + gridDim.x (y + gridDim.y z)) into g_entries, an array of one entry a block that the
// host points it at (cudaMemcpyToSymbol); null, nothing is written. A kernel whose main loop
// also says FLASHLAB_BLOCK_LOG_STEP(j) at the top of step j logs when its block began each
// step (a step log, for the replay's LoggedBlock::step_starts): thread 0 writes %globaltimer
// into g_steps[block x g_step_capacity + j] where the host set g_steps and j is below
// g_step_capacity.
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

// The step log: g_step_capacity entries a block (0, or g_steps null: no step log).
__device__ uint64_t* g_steps = nullptr;
__device__ uint32_t g_step_capacity = 0;

__device__ __forceinline__ void step(int j) {
  if (threadIdx.x != 0 || g_steps == nullptr || uint32_t(j) >= g_step_capacity) return;
  const uint64_t block =
      blockIdx.x + uint64_t(gridDim.x) * (blockIdx.y + uint64_t(gridDim.y) * blockIdx.z);
  g_steps[block * g_step_capacity + uint32_t(j)] = now();
}

}  // namespace flashlab::gpu::block_log

#define FLASHLAB_BLOCK_LOG_BEGIN const uint64_t flashlab_block_log_start = ::flashlab::gpu::block_log::now()
#define FLASHLAB_BLOCK_LOG_END ::flashlab::gpu::block_log::write(flashlab_block_log_start)
#define FLASHLAB_BLOCK_LOG_STEP(j) ::flashlab::gpu::block_log::step(j)

#else

#define FLASHLAB_BLOCK_LOG_BEGIN static_cast<void>(0)
#define FLASHLAB_BLOCK_LOG_END static_cast<void>(0)
#define FLASHLAB_BLOCK_LOG_STEP(j) static_cast<void>(0)

#endif

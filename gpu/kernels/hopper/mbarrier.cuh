// mbarrier: a 64-bit barrier object in SRAM that counts two things, thread arrivals and
// bytes of asynchronous copies (TMA) still to land. A phase completes when both reach zero;
// then the barrier flips its phase bit and re-arms itself with the arrival count it was
// initialised with. Waiters name the phase they wait for by its parity (0, 1, 0, 1, ...),
// so a ring of stages needs no reset: stage s's k-th use waits for parity k % 2.
// PTX ISA: "Parallel Synchronization and Communication Instructions: mbarrier".
#pragma once

#include "../ptx.cuh"

#include <cstdint>

namespace flashlab::gpu::hopper {

// Sets up the barrier for `arrivals` arrivals per phase. One thread calls it; the others may
// use the barrier only after fence_barrier_init() and a __syncthreads().
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(ptx::sram_address(bar)),
               "r"(arrivals));
}

// Makes the barriers just initialised visible to the copy engine (the async proxy), which
// will complete transactions on them.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival, announcing also that `bytes` more bytes will land on this barrier (by TMA
// copies that name it) before its phase may complete.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(ptx::sram_address(bar)),
      "r"(bytes)
      : "memory");
}

// One arrival.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(ptx::sram_address(bar))
               : "memory");
}

// Blocks until the phase of parity `parity` has completed. try_wait suspends the thread
// for a while in hardware before it answers false, so the loop does not spin hot.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t address = ptx::sram_address(bar);
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  }
}

}  // namespace flashlab::gpu::hopper

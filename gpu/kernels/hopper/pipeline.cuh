// The producer/consumer rings of K and V stages (FlashAttention-3, section 3.1): `stages`
// SRAM buffers for K tiles and as many for V tiles, each buffer with two mbarriers.
//   full[s]:  the producer announces the bytes of a tile (arrive.expect_tx) and TMA
//             completes them; consumers wait on it before reading buffer s.
//   empty[s]: every consumer thread arrives once it is done with buffer s (the wgmma that
//             read it have completed); the producer waits on it before refilling s.
// K and V have rings of their own because they are done with at different times: K_j after
// S_j = Q K_j^T, V_j only after U += W_j V_j, one softmax later. With one ring for both, a
// single stage could never hold K_{j+1} while V_j is still being read.
// The ring's use j (a block's running count of the tiles it has loaded, kept modulo 2 stages;
// 06_fa3.cu's RingUses: an item's tile j is use `kv + j`) lives in buffer j % stages, and it
// is that buffer's (j / stages)-th use, so the phase to wait for has parity (j / stages) % 2.
// The producer's first pass over a ring waits on the empty barriers with the opposite parity,
// which an mbarrier counts as the phase just before its first one and reports complete: the
// buffers start out free.
// Q has a ring of its own, of one or two buffers (fa3::q_buffers), used once per work item:
// item u's Q takes buffer u % q_buffers, parity (u / q_buffers) % 2. The producer loads it
// once every consumer has released the Q of the item that last used that buffer (its last
// S = Q K^T has landed). With two, a persistent block's next Q comes in while the consumers
// still work on this item. Beside each Q buffer the kernel keeps a slot for the item (its index
// and the tile worked out from it, 06_fa3.cu's ItemSlot), published by the same full barrier:
// the consumers read their item there on every grid with a producer, the work queue's too.
#pragma once

#include "mbarrier.cuh"

#include <cstdint>

namespace flashlab::gpu::hopper {

// elect.sync: true in exactly one active lane of the warp. The compiler knows the lane is
// chosen warp-uniformly, unlike `lane == 0`, and keeps the warp's later wgmma asynchronous.
__device__ __forceinline__ bool elect_one_lane() {
  uint32_t elected = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "elect.sync _|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(elected));
  return elected != 0;
}

// Where the ring's use j sits and which phase of its barriers belongs to it.
struct Stage {
  int index;        // the buffer: j % stages
  uint32_t parity;  // (j / stages) % 2
  __device__ __forceinline__ Stage(int j, int stages)
      : index(j % stages), parity(uint32_t(j / stages) & 1u) {}
  // The same for a use j < 2 stages (a ring's count kept modulo its two passes), without the
  // division.
  __device__ __forceinline__ static Stage of_use_below_two_passes(int j, int stages) {
    Stage s(0, 1);  // buffer 0, the first pass: then set as use j's
    s.index = j < stages ? j : j - stages;
    s.parity = j < stages ? 0u : 1u;
    return s;
  }
  // Tile j + 1's stage, without the division: the next buffer, and the parity flipped when
  // the ring wraps around (a consumer steps through its tiles this way, since `stages` is a
  // run-time value and each division would cost some twenty instructions per tile).
  __device__ __forceinline__ Stage next(int stages) const {
    Stage s = *this;
    if (++s.index == stages) {
      s.index = 0;
      s.parity ^= 1u;
    }
    return s;
  }
};

// One ring's barriers, in SRAM; sized for the most stages a kernel may use.
template <int kMaxStages>
struct Ring {
  uint64_t full[kMaxStages];
  uint64_t empty[kMaxStages];

  // One thread, before any use; then fence_barrier_init() and __syncthreads().
  __device__ __forceinline__ void init(int stages, uint32_t consumer_threads) {
    for (int s = 0; s < stages; ++s) {
      mbarrier_init(&full[s], 1);  // the producer's arrive.expect_tx; TMA brings the bytes
      mbarrier_init(&empty[s], consumer_threads);
    }
  }
  // Consumer: wait until tile j has landed.
  __device__ __forceinline__ void consumer_wait(Stage st) {
    mbarrier_wait(&full[st.index], st.parity);
  }
  // Consumer: this thread is done reading tile j's buffer.
  __device__ __forceinline__ void consumer_release(Stage st) { mbarrier_arrive(&empty[st.index]); }
  // Producer, a whole warp: wait until tile j's buffer is free (every consumer released
  // tile j - stages). Then one lane (the caller's elected one) announces the bytes the
  // copies of tile j will complete with producer_expect, and issues them.
  __device__ __forceinline__ void producer_acquire(Stage st) {
    mbarrier_wait(&empty[st.index], st.parity ^ 1u);
  }
  __device__ __forceinline__ uint64_t* producer_expect(Stage st, uint32_t bytes) {
    mbarrier_arrive_expect_tx(&full[st.index], bytes);
    return &full[st.index];
  }
};

// Every barrier of the forward kernel.
template <int kMaxStages, int kMaxQBuffers>
struct PipelineBarriers {
  Ring<kMaxQBuffers> q;
  Ring<kMaxStages> k, v;

  __device__ __forceinline__ void init(int q_buffers, int stages, uint32_t consumer_threads) {
    q.init(q_buffers, consumer_threads);
    k.init(stages, consumer_threads);
    v.init(stages, consumer_threads);
  }
};

}  // namespace flashlab::gpu::hopper

// fa3's pipeline as one block ran it: each role (the producer warp, each consumer warpgroup)
// writes an entry at each step of its work (a tile's copy issued, S_j issued and landed, its
// softmax done, U += W V landed, O written, ...), stamped with the SM's cycle counter, so that
// the timeline of lesson 8 can be read off a real kernel and an item's fixed cost taken apart.
// Only bench programs that define FLASHLAB_WITH_PIPELINE_LOG before including the kernel's
// source build it in (bench/gpu/pipeline_log.cu); the library's kernels compile without it,
// instruction for instruction as before.
//
// A kernel takes it in these lines (each nothing without the log):
// - FLASHLAB_PIPELINE_LOG_BLOCK_BEGIN and _END at its top and its end: the block's SM, and
//   thread 0's %globaltimer beside its %clock64 at both, to turn cycles into time;
// - FLASHLAB_PIPELINE_LOG_WRITER(role, writes) where a role's work starts (`writes`: the one
//   thread of the role that logs), then FLASHLAB_PIPELINE_LOG(event, item, j) at each step;
// - in a function called from there, FLASHLAB_PIPELINE_LOG_PARAM among its parameters (the
//   writer and the item), FLASHLAB_PIPELINE_LOG_ARG(item) at the call, and inside it
//   FLASHLAB_PIPELINE_LOG(event, flashlab_pipeline_log_item, j).
// Each (logged block, role) writes into its own kCapacity entries of g_entries, in order, with
// no atomics; entries past kCapacity - 1 are dropped and counted.
#pragma once

#ifdef FLASHLAB_WITH_PIPELINE_LOG

#include <cstdint>

namespace flashlab::gpu::pipeline_log {

// What an entry records. j: the KV tile (or -1 where none applies).
enum Event : uint8_t {
  kItem,           // a consumer has its next work item (j: the KV tiles it computes of it)
  kQLanded,        // the item's Q is in SRAM (consumer)
  kDataLanded,     // section j's K_j and V_{j-1} are in SRAM (consumer)
  kTurn,           // ping-pong: the turn to issue section j's matmuls (consumer)
  kScoresIssued,   // S_j = Q K_j^T issued (with U += W_{j-1} V_{j-1} from section 1 on)
  kScoresLanded,   // S_j has landed in registers
  kSoftmaxDone,    // the online softmax of S_j is done, W_j made
  kValuesIssued,   // the item's last U += W V issued (j: its tile)
  kValuesLanded,   // U += W_j V_j has landed (U may be rescaled or divided)
  kOReady,         // O through SRAM: sO free (its last TMA store has read it), every thread in
  kOStaged,        // O through SRAM: O = U / l in sO and LSE stored, visible to the copy engine
  kOWritten,       // O = U / l and LSE written (or handed to the TMA store)
  kQIssued,        // producer: the item's Q copy issued (its buffer acquired)
  kKIssued,        // producer: K_j's copy issued (its ring slot acquired)
  kVIssued,        // producer: V_j's copy issued
  kEvents
};
// Their names in bench_pipeline_log's CSV (bench/gpu/pipeline_log.py reads them), in the
// enum's order.
inline constexpr const char* kEventNames[kEvents] = {
    "item",          "q_landed",     "data_landed",   "turn",          "scores_issued",
    "scores_landed", "softmax_done", "values_issued", "values_landed", "o_ready",
    "o_staged",      "o_written",    "q_issued",      "k_issued",      "v_issued"};
static_assert(sizeof(kEventNames) / sizeof(kEventNames[0]) == kEvents);

struct Entry {
  uint64_t clock = 0;  // %clock64 of the SM
  int32_t item = -1;   // the work item
  int16_t j = -1;
  uint8_t event = 0, role = 0;  // role 0: the producer warp; 1 + c: consumer warpgroup c
};
static_assert(sizeof(Entry) == 16);

// Thread 0's start and end in both clocks: the SM's cycles turned into ns. (Thread 0 is the
// producer's, which ends before the consumers; the two readings only calibrate the clock.)
struct Block {
  uint64_t globaltimer_begin = 0, clock_begin = 0, globaltimer_end = 0, clock_end = 0;
  uint32_t sm = 0, dropped = 0;  // entries that found no place, all roles
};

inline constexpr int kRoles = 4;         // the producer and up to three consumers
inline constexpr int kCapacity = 16384;  // places a (block, role), the last left empty

// Set from the host (cudaMemcpyToSymbol): blocks [0, g_logged_blocks) log, each into
// g_blocks[b] and g_entries[(b kRoles + role) kCapacity ..].
__device__ Entry* g_entries = nullptr;
__device__ Block* g_blocks = nullptr;
__device__ int g_logged_blocks = 0;

__device__ __forceinline__ bool logged() {
  return g_entries != nullptr && int(blockIdx.x) < g_logged_blocks;
}
__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void block_begin() {
  if (threadIdx.x != 0 || !logged()) return;
  Block& b = g_blocks[blockIdx.x];
  asm volatile("mov.u32 %0, %%smid;" : "=r"(b.sm));
  b.clock_begin = clock64();
  b.globaltimer_begin = globaltimer();
}
__device__ __forceinline__ void block_end() {
  if (threadIdx.x != 0 || !logged()) return;
  Block& b = g_blocks[blockIdx.x];
  b.clock_end = clock64();
  b.globaltimer_end = globaltimer();
}

// One role's entries: only the thread that `writes` has a place to write to. It keeps one
// register, the index of its next entry in g_entries (-1: none), so that the log takes as few
// as it can from the consumers, which have none to spare; the array's address is read at each
// write (it does not change during the launch).
class Writer {
 public:
  __device__ __forceinline__ Writer(int role, bool writes)
      : next_(writes && logged() ? (int(blockIdx.x) * kRoles + role) * kCapacity : -1) {}
  __device__ __forceinline__ void operator()(Event e, int64_t item, int j) {
    if (next_ < 0) return;
    const int role = next_ / kCapacity % kRoles;
    if (next_ % kCapacity == kCapacity - 1) {  // the last place is kept empty: the end mark
      atomicAdd(&g_blocks[blockIdx.x].dropped, 1u);
      return;
    }
    const auto entries = reinterpret_cast<Entry*>(
        __ldg(reinterpret_cast<const unsigned long long*>(&g_entries)));
    entries[next_++] = {uint64_t(clock64()), int32_t(item), int16_t(j), uint8_t(e), uint8_t(role)};
  }

 private:
  int next_;
};

}  // namespace flashlab::gpu::pipeline_log

#define FLASHLAB_PIPELINE_LOG_BLOCK_BEGIN ::flashlab::gpu::pipeline_log::block_begin()
#define FLASHLAB_PIPELINE_LOG_BLOCK_END ::flashlab::gpu::pipeline_log::block_end()
#define FLASHLAB_PIPELINE_LOG_WRITER(role, writes) \
  ::flashlab::gpu::pipeline_log::Writer flashlab_pipeline_log((role), (writes))
#define FLASHLAB_PIPELINE_LOG(event, item, j) \
  flashlab_pipeline_log(::flashlab::gpu::pipeline_log::event, (item), (j))
#define FLASHLAB_PIPELINE_LOG_PARAM \
  , ::flashlab::gpu::pipeline_log::Writer &flashlab_pipeline_log, int64_t flashlab_pipeline_log_item
#define FLASHLAB_PIPELINE_LOG_ARG(item) , flashlab_pipeline_log, (item)

#else

#define FLASHLAB_PIPELINE_LOG_BLOCK_BEGIN static_cast<void>(0)
#define FLASHLAB_PIPELINE_LOG_BLOCK_END static_cast<void>(0)
#define FLASHLAB_PIPELINE_LOG_WRITER(role, writes) static_cast<void>(0)
#define FLASHLAB_PIPELINE_LOG(event, item, j) static_cast<void>(0)
#define FLASHLAB_PIPELINE_LOG_PARAM
#define FLASHLAB_PIPELINE_LOG_ARG(item)

#endif

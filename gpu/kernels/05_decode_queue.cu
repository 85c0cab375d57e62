// Version 5c: split-KV decode in persistent blocks that take their work from a queue. The same
// steps as 05_decode_split_kv.cu (decode_steps.cuh: a warp's online softmax over its 16 keys
// of every tile, the warps' merge, one state per query row and piece for 05_decode_combine.cu),
// laid out differently on the GPU:
//   - The work items are (piece, KV head x row block, batch entry): each sequence is cut into
//     `splits` pieces that shrink along it (decode::piece_first_tile), and the queue lists them
//     piece-major, every sequence's piece 0 first. The grid is sm_count x the blocks an SM holds
//     (kBlocksPerSm by design; the occupancy query's answer), or the items if fewer;
//     block k starts on item k, and whenever it ends an item, its thread 0 claims the next one
//     with an atomic add on the queue's counter in the workspace. SMs that stream faster (the
//     split grid's equal blocks ended up to a fifth apart, by the SM they ran on) take more
//     items, and the last items are the smallest, so the blocks end close together.
//   - A block keeps two items in hand, the one it computes (`cur`) and the one it has claimed
//     next (`nxt`), and its ring of K and V tiles runs on from one into the other: the copy
//     cursor is up to stages - 1 tiles ahead of the compute and crosses into nxt's first tiles
//     while cur's last ones are computed, so no item starts on an empty ring.
//   - So the ring is in use while an item's warps merge their states: the merge takes its own
//     SRAM, 8 packed rows at a time (decode::queue_merge_bytes).
// The result does not depend on which block took which item: a piece's keys are fixed by its
// sequence's length, every piece starts from the empty state, and its state is written to the
// piece's own place in the workspace, merged by the combine in piece order.
// Bytes: as the split kernel's per piece (Q's rows once per piece, K and V once, a state per
// row and piece), plus one atomic on the counter per item and per block, each a 32-byte sector
// out of the SMs (measured: docs/IO-LEVELS.md).
// Measured on the H200 it is slower than the split grid (0.99 of it at 131072 keys, 0.94 to
// 0.97 at 32768): the loop's bookkeeping costs 0.5 to 1% and each item about a microsecond,
// more than the balance buys (bench/gpu/NOTES.md, "Decode's queue grid"). So the split grid is
// the default (decode::kDefaultGrid) and this one is there to be run and measured.
#include "decode_steps.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace flashlab::gpu {
namespace {

using namespace decode;
using namespace decode_steps;

// One work item: piece `piece` of batch entry b's keys, for the packed rows of (KV head, row
// block). index >= the queue's length: none (no tiles).
struct Item {
  int index = 0;
  int b = 0, kv_head = 0, row_block = 0, piece = 0, len = 0;
  KeyRange range;
};

// The queue's item `index`: piece-major, then batch entry, then KV head x row block. `report`:
// the thread that flags a bad length, once per batch entry (its piece 0 of KV head 0).
__device__ __forceinline__ Item item_at(const DecodeProblem& p, int index, int items,
                                        bool report) {
  Item it;
  it.index = index;
  if (index >= items) return it;
  const int per_piece = p.items_per_piece();
  it.piece = index / per_piece;
  const int rest = index % per_piece;
  const int y = rest % (p.heads_kv * p.row_blocks);
  it.b = rest / (p.heads_kv * p.row_blocks);
  it.kv_head = y / p.row_blocks;
  it.row_block = y % p.row_blocks;
  it.len = clamp_length(p, it.b, p.seq_lens[it.b], report && it.piece == 0 && y == 0);
  const int tiles = (it.len + kBc - 1) / kBc;
  it.range = key_range(it.len, piece_first_tile(tiles, p.splits, it.piece),
                       piece_first_tile(tiles, p.splits, it.piece + 1));
  return it;
}

// cp.async.wait_group with a count known only at run time, 0 <= pending <= kMax: waits until
// at most `pending` of this thread's most recent groups are still in flight.
template <int kMax>
__device__ __forceinline__ void cp_async_wait_at_most(int pending) {
  if constexpr (kMax == 0) {
    ptx::cp_async_wait<0>();
  } else {
    if (pending >= kMax)
      ptx::cp_async_wait<kMax>();
    else
      cp_async_wait_at_most<kMax - 1>(pending);
  }
}

template <class T, int kD, bool kEvictFirst>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    decode_queue_kernel(const DecodeProblem p) {
  using S = Shape<kD>;
  extern __shared__ __align__(128) unsigned char sram[];
  T* sK = reinterpret_cast<T*>(sram);       // the ring: (stages, Bc, d), swizzled
  T* sV = sK + S::kStages * S::kTileElems;  // (stages, Bc, d), swizzled
  float* sMerge = reinterpret_cast<float*>(sram + S::kRingBytes);
  int* sClaim = reinterpret_cast<int*>(sram + S::kRingBytes + S::kQueueMergeBytes);

  // The combine kernel may be launched now (programmatic dependent launch, as the split grid).
  cudaTriggerProgrammaticLaunchCompletion();

  const int t = threadIdx.x, warp = t / kWarpSize, lane = t % kWarpSize;
  const int items = p.queue_items();
  unsigned* counter = p.error_word + kQueueCounterWord;
  // The queue: items [0, gridDim.x) are the blocks' first; claims hand out the rest in order.
  auto claim = [&]() { return int(gridDim.x + atomicAdd(counter, 1u)); };

  if (t == 0) *sClaim = claim();
  Item cur = item_at(p, blockIdx.x, items, t == 0);
  __syncthreads();
  Item nxt = item_at(p, *sClaim, items, t == 0);

  // The copy cursor: the next tile to copy is tile `cursor_tile` of cur (or of nxt when
  // `load_on_nxt`); `loaded` and `computed` count the block's tiles copied and computed so
  // far, so a tile's stage is its count mod stages.
  const CopyLane<kD> copy(t);
  const uint64_t l2_policy = kEvictFirst ? ptx::l2_evict_first_policy() : 0;
  bool load_on_nxt = false;
  int cursor_tile = 0, loaded = 0, computed = 0;
  int entry_ahead = 0;  // paged: the block-table entry of the cursor's next tile, read a step early
  auto read_entry_ahead = [&]() {
    if (p.block_table == nullptr) return;
    const bool on_nxt = load_on_nxt || cursor_tile >= cur.range.tiles;
    const int tile = load_on_nxt || cursor_tile < cur.range.tiles ? cursor_tile : 0;
    entry_ahead = on_nxt ? table_entry(p, nxt.b, nxt.range, tile, copy)
                         : table_entry(p, cur.b, cur.range, tile, copy);
  };
  // Starts the copy of the cursor's next tile, if it has one and its stage is free (the tile
  // `stages` before it has been computed by every warp); then commits a group, even empty.
  auto load_next = [&]() {
    if (!load_on_nxt && cursor_tile >= cur.range.tiles) {
      load_on_nxt = true;
      cursor_tile = 0;
    }
    // A copy: a reference to either would put both in local memory.
    const Item it = load_on_nxt ? nxt : cur;
    if (cursor_tile < it.range.tiles && loaded < computed + S::kStages) {
      const int stage = loaded % S::kStages;
      load_tile<T, kD, kEvictFirst>(p, it.b, it.kv_head, it.range, cursor_tile, entry_ahead, copy,
                                    sK + stage * S::kTileElems, sV + stage * S::kTileElems,
                                    l2_policy);
      ++cursor_tile;
      ++loaded;
      read_entry_ahead();
    }
    ptx::cp_async_commit();
  };

  read_entry_ahead();
  for (int s = 0; s < S::kStages - 1; ++s) load_next();  // the ring's first stages - 1 tiles

  const float scale_log2 = p.scale * kLog2e;
  SoftmaxState<kD> state;
  QueryRows<kD> q;
  while (cur.index < items) {
    load_query_rows<T, kD>(q, p, cur.b, cur.kv_head, cur.row_block, cur.len, cur.range.tiles > 0,
                           lane);
    state.reset();
    for (int tile = 0; tile < cur.range.tiles; ++tile) {
      if (loaded == computed) load_next();  // after an item with fewer tiles than the ring
      cp_async_wait_at_most<S::kStages - 2>(loaded - computed - 1);  // `tile` has landed here
      __syncthreads();  // and everywhere; every warp is done with the previous tile's stage
      load_next();      // into that stage
      const int stage = computed % S::kStages;
      step<T, kD>(state, q, sK + stage * S::kTileElems, sV + stage * S::kTileElems,
                  cur.range.k0 + tile * kBc, warp, lane, scale_log2);
      ++computed;
    }
    // The item's end: claim the one after nxt (the atomic's trip overlaps the merge), merge
    // the warps' states into the piece's state, and move on: nxt becomes cur.
    int claimed = 0;
    if (t == 0) claimed = claim();
    merge_warps<T, kD, kQueuePassRows, /*kMayEndRows=*/false>(
        state, sMerge, p, cur.b, cur.kv_head, q.first_row, q.rows, cur.piece,
        /*ends_rows=*/false, warp, lane, t, scale_log2);
    if (t == 0) *sClaim = claimed;
    __syncthreads();
    claimed = *sClaim;
    if (load_on_nxt)
      load_on_nxt = false;  // the cursor is on nxt, which becomes cur
    else
      cursor_tile = 0;      // the cursor ended cur; it starts on the new cur
    cur = nxt;
    nxt = item_at(p, claimed, items, t == 0);
    read_entry_ahead();
  }
  ptx::cp_async_wait<0>();  // no copy is left in flight at exit (the last groups are empty)
}

template <class T, int kD, bool kEvictFirst>
void launch(const DecodeProblem& p, int sm_count, cudaStream_t stream) {
  const auto kernel = decode_queue_kernel<T, kD, kEvictFirst>;
  const int sram = int(queue_sram_bytes(kD));
  throw_if_cuda_error(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sram),
      "cudaFuncSetAttribute(decode_queue)");
  int resident = 0;  // blocks an SM holds: kBlocksPerSm by design, checked
  throw_if_cuda_error(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, sram),
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor(decode_queue)");
  const int64_t items = p.queue_items();
  const int64_t slots = int64_t(sm_count) * (resident > 0 ? resident : 1);
  const unsigned blocks = unsigned(items < slots ? items : slots);
  kernel<<<blocks, kThreads, sram, stream>>>(p);
  check_launch("decode_queue");
}

}  // namespace

void launch_decode_queue(const DecodeProblem& p, int sm_count, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, float>) {
      if (p.d == 64)
        p.kv_evict_first ? launch<T, 64, true>(p, sm_count, stream)
                         : launch<T, 64, false>(p, sm_count, stream);
      else
        p.kv_evict_first ? launch<T, 128, true>(p, sm_count, stream)
                         : launch<T, 128, false>(p, sm_count, stream);
    }
  });
}

}  // namespace flashlab::gpu

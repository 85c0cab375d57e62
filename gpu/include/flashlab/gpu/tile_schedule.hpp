// fa3's tile scheduler: which work item each block of the grid takes, and in which order.
// A work item is one query tile (Br rows) of one (batch, query head) pair. Written once,
// for the kernel (gpu/kernels/06_fa3.cu) and for host code (the tests check the order on
// the CPU). Plain C++17: it builds without CUDA.
//
// Three launches share the order (flashlab_fa3_options.grid):
//   persistent: one block per SM; block k takes items k, k + grid, k + 2 grid, ... So the
//     block's set-up (barriers, TMA descriptors) is paid once per SM, not once per tile,
//     and the producer loads the next item's Q, K_0 and V_0 while the consumers still run
//     this item's last U += W V and store its O.
//   a work queue: one block per SM; block k takes item k first, then whichever item is next
//     in the order when it is nearly ready for one (its producer has issued the last loads
//     of its current item, `stages` KV tiles before the consumers are done with it): grid +
//     the count of items taken so far from a counter in device memory (atomicAdd), zeroed
//     before the launch. What fixed turns do for equal tiles, the queue does for unequal
//     ones: a block that drew a long causal tile takes fewer.
//   one block per item (FlashAttention-2's grid): block k takes item k, in blockIdx order.
// The order. The (batch, head) pairs are cut into sections of `section_pairs` pairs whose K
// and V together fit in a share of the L2 (fa3::kv_section_budget). Inside a section the pair
// varies fastest and the query tile slowest, so the blocks in flight at one time read the K
// and V of a section's few heads, which stay in the L2 while every query tile of those heads
// goes by. Under the causal mask the query tiles are taken from the last (it sees the most
// keys: the longest) to the first, so the short ones fill the end of the section; G is evened
// out over the sections (even_section_pairs, below), and the sections are whole (G pairs) but
// the first, which takes the P = pairs mod G left over, so that the grid ends on a whole
// section: its G Tr items, longest first, leave the blocks less uneven at the end than a last
// section of P pairs' few long items would (measured: +1.3 to 2.6% at d = 128, N = 2048 and
// 4096, and at d = 64, N = 4096; NOTES.md).
// Without the mask, where every item is equal, the last section is the partial one (P = 0
// below; the partial first measured 0.9 to 1.9% slower at d = 128, N = 1024):
//   G = section_pairs, Tr = tiles per pair, P = causal ? pairs mod G : 0;
//   item w < P Tr: g = P, first pair 0, r = w;
//   else: w' = w - P Tr, s = w' / (G Tr), g = min(G, pairs - P - s G), first pair P + s G,
//         r = w' - s G Tr;
//   pair = first pair + r % g;  step = r / g;  tile = causal ? Tr - 1 - step : step.
// Static round robin, not a queue: fine where every item has the same work (no causal
// mask). Causal items differ in length, and fixed turns share them unevenly: on ANCHORS.md's
// shapes the busiest persistent block gets 6% to 25% more than the mean (tile_balance.hpp
// counts it; `flashlab lesson 12` prints the table), against 0% to 2% for blocks dispatched
// by the hardware as SMs free up, longest first. The work queue balances causal tiles as
// dispatch does, and keeps the persistent set-up (FLASHLAB_FA3_GRID_QUEUE).
// FLASHLAB_FA3_GRID_AUTO (resolve_grid below; kernel_info.hpp has the measured figures): with
// a producer warp, the work queue under the causal mask (heads of at least
// fa3::kAutoQueueMinTiles query tiles) and, without the mask, with three consumers (d = 64);
// else the persistent turns up to fa3::kAutoPersistentMaxTiles query tiles a head and one
// block per tile beyond.
#pragma once

#include "flashlab/gpu/host_device.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <cstdint>

namespace flashlab::gpu::fa3 {

inline constexpr int64_t kMaxInt32 = 2147483647;

struct TileOrder {
  int64_t items = 0;           // pairs x tiles
  int heads_q = 1;             // pair = b heads_q + h
  int pairs = 0;               // batch x heads_q
  int tiles = 0;               // Tr = ceil(N_q / Br): query tiles per pair
  int rows = 0;                // Br = fa3::br(d): query rows per tile
  int kv_tiles = 0;            // Tc = ceil(N_k / Bc): KV tiles per pair
  int section_pairs = 1;       // G: pairs whose K and V share the L2 at one time
  bool longest_first = false;  // causal: the last query tile of a pair first
};

struct WorkItem {
  int b = 0, h = 0;  // batch entry, query head
  int tile = 0;      // query tile: rows [tile Br, tile Br + Br)
};

// Under the mask the automatic plan takes as few sections as hold at most `most` pairs each,
// and evens them out: G = ceil(pairs / ceil(pairs / most)), so the partial section that comes
// first is nearly as large as the whole ones (16 heads on an L2 room of 15: 8 and 8, not 1 and
// 15). A whole section that fills a side of the L2 after a small partial one is where the
// hardware re-read K and V that the model kept (1.21 to 1.23 of its DRAM bytes on both cards;
// docs/IO-LEVELS.md, "Sections that fill a side of the L2"); evened out, the same number of
// sections each fill less of it. Measured on an H100 (2026-12-06, bench/results/h100/
// 2026-12-06-h100-fa3-even-sections-*.csv): 16 heads of N = 4096, d = 128 read 48.9 MiB from
// DRAM (the model 48.2) where 4 and 12 read 58.9; B = 4 x 16 heads 252 MB against 271; the
// time in turns on the goal's causal shapes 0.97 to 1.02 of the plan before, mean 0.999. An
// explicit share (kv_l2_share) takes as many as fit, the experiment's plan.
constexpr int even_section_pairs(int pairs, int most) {
  const int sections = (pairs + most - 1) / most;
  return (pairs + sections - 1) / sections;
}

// The order for a problem of (batch, heads_q, heads_kv, N_q, N_k, d) with elements of
// elem_bytes, on a GPU with l2_bytes of L2, its sections planned on kv_l2_share percent of it
// (flashlab_fa3_options.kv_l2_share; FLASHLAB_FA3_AUTO: auto_kv_l2_share's). A query head's share
// of K and V is 2 N_k d elem_bytes / group (the heads of a GQA group read the same KV head).
constexpr TileOrder make_tile_order(int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t n_q,
                                    int64_t n_k, int64_t d, int64_t elem_bytes, bool causal,
                                    int64_t l2_bytes, int32_t kv_l2_share = FLASHLAB_FA3_AUTO) {
  TileOrder o;
  o.heads_q = int(heads_q);
  o.pairs = int(batch * heads_q);
  o.rows = br(d);
  o.tiles = int((n_q + o.rows - 1) / o.rows);
  o.kv_tiles = int((n_k + kBc - 1) / kBc);
  o.items = int64_t(o.pairs) * o.tiles;
  const int64_t group = heads_kv > 0 ? heads_q / heads_kv : 1;
  const int64_t kv_per_pair = (2 * n_k * d * elem_bytes + group - 1) / group;
  const int32_t share =
      kv_l2_share != FLASHLAB_FA3_AUTO ? kv_l2_share : auto_kv_l2_share(causal, d, o.tiles);
  const int64_t budget = kv_section_budget(l2_bytes, causal, share);
  const int64_t fit = kv_per_pair > 0 ? budget / kv_per_pair : o.pairs;
  const int most = int(fit < 1 ? 1 : fit > o.pairs ? o.pairs : fit);
  o.section_pairs = causal && kv_l2_share == FLASHLAB_FA3_AUTO ? even_section_pairs(o.pairs, most)
                                                              : most;
  o.longest_first = causal;
  return o;
}

// Work item w (0 <= w < o.items) of the order, in integers of type I: int64_t always does,
// int where o.items fits it (a 64-bit division costs a GPU thread several times more).
template <class I>
FLASHLAB_HOST_DEVICE constexpr WorkItem work_item_as(const TileOrder& o, I w) {
  // Under the mask the partial section (pairs mod G of them) comes first: the last section
  // is then a whole one, whose many items, longest first, even out the blocks' ends.
  const I partial = o.longest_first ? I(o.pairs) % I(o.section_pairs) : I(0);
  const I per_section = I(o.section_pairs) * I(o.tiles);
  I first_pair = 0, g = partial, r = w;
  if (w >= partial * I(o.tiles)) {
    const I from_whole = w - partial * I(o.tiles);
    const I s = from_whole / per_section;
    first_pair = partial + s * I(o.section_pairs);
    const I left = I(o.pairs) - first_pair;
    g = left < I(o.section_pairs) ? left : I(o.section_pairs);
    r = from_whole - s * per_section;
  }
  const int pair = int(first_pair + r % g);
  const int step = int(r / g);
  WorkItem item;
  item.b = pair / o.heads_q;
  item.h = pair % o.heads_q;
  item.tile = o.longest_first ? o.tiles - 1 - step : step;
  return item;
}
FLASHLAB_HOST_DEVICE constexpr WorkItem work_item(const TileOrder& o, int64_t w) {
  return o.items <= kMaxInt32 ? work_item_as<int>(o, int(w)) : work_item_as<int64_t>(o, w);
}

// Whether `grid` is one of flashlab_fa3_grid's values.
constexpr bool is_grid(int32_t grid) {
  return grid == FLASHLAB_FA3_GRID_PER_TILE || grid == FLASHLAB_FA3_GRID_PERSISTENT ||
         grid == FLASHLAB_FA3_GRID_AUTO || grid == FLASHLAB_FA3_GRID_QUEUE;
}

// The grid that flashlab_fa3_grid `grid` runs for an order: itself, or for
// FLASHLAB_FA3_GRID_AUTO, where there is a producer warp to take from it, the work queue
// under the causal mask (a head of at least fa3::kAutoQueueMinTiles query tiles) and without
// it (at least fa3::kAutoQueueWithoutMaskMinConsumers consumer warpgroups, d = 64's); else
// persistent in fixed turns up to fa3::kAutoPersistentMaxTiles query tiles a head, and one
// block per tile beyond.
constexpr flashlab_fa3_grid resolve_grid(int32_t grid, const TileOrder& o, bool warp_specialized) {
  if (grid != FLASHLAB_FA3_GRID_AUTO) return flashlab_fa3_grid(grid);
  const int consumers = o.rows / kRowsPerConsumer;
  if (warp_specialized && (o.longest_first ? o.tiles >= kAutoQueueMinTiles
                                           : consumers >= kAutoQueueWithoutMaskMinConsumers))
    return FLASHLAB_FA3_GRID_QUEUE;
  return o.tiles <= kAutoPersistentMaxTiles ? FLASHLAB_FA3_GRID_PERSISTENT
                                            : FLASHLAB_FA3_GRID_PER_TILE;
}

// Whether the grid of flashlab_fa3_grid `grid` is persistent for an order.
constexpr bool is_persistent(int32_t grid, const TileOrder& o, bool warp_specialized) {
  return resolve_grid(grid, o, warp_specialized) != FLASHLAB_FA3_GRID_PER_TILE;
}

// The item a block takes after `item`: the next of its fixed turns, or from the work queue,
// where `taken` is how many items the blocks had taken from it before (the counter's old
// value). Items from o.items on mean the block is done.
FLASHLAB_HOST_DEVICE constexpr int64_t next_in_turn(int64_t item, int64_t grid) {
  return item + grid;
}
FLASHLAB_HOST_DEVICE constexpr int64_t next_from_queue(int64_t taken, int64_t grid) {
  return grid + taken;
}

// The grid: one block per SM when persistent (never more blocks than items), else one block
// per item up to the grid's limit (the blocks then stride over the rest as the persistent
// ones do).
constexpr int64_t grid_blocks(const TileOrder& o, bool persistent, int64_t sm_count) {
  const int64_t cap = persistent ? (sm_count > 0 ? sm_count : 1) : kMaxGridX;
  return o.items < cap ? o.items : cap;
}

}  // namespace flashlab::gpu::fa3

// How evenly a grid of persistent blocks shares fa3's work items (tile_schedule.hpp): the
// busiest block's work over the mean, 1 where every block does the same. An item's work is
// counted as the KV tiles it reads, for N_q = N_k: every tile without the mask; under the
// top-left mask those up to its last row's diagonal, ceil((i + 1) Br / Bc) for query tile i
// (i + 1 where Br = Bc: the last query tile of a head reads them all, the first one). An
// item's own set-up and epilogue are left out. Two ways to
// hand the items out:
//   in turns: block k takes items k, k + grid, k + 2 grid, ... whatever they cost;
//   in order, as blocks free up: each block, when done, takes the next item of the order.
//     That is what the hardware's dispatch does with one block per item, and, near enough,
//     what fa3's work queue (FLASHLAB_FA3_GRID_QUEUE) does with one block per SM: its
//     producer claims the next item a little early, `stages` KV tiles before the block is
//     free, which can hand an item to another block but, counted so, leaves the busiest
//     block's work unchanged at ANCHORS.md's shapes (tests/gpu/test_tile_schedule.cpp runs
//     the queue as the kernel does and checks it).
// Host code for the tests and the lessons; plain C++17.
#pragma once

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/tile_schedule.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace flashlab::gpu::fa3 {

// KV tiles item w reads (N_q = N_k; causal: the top-left mask).
inline int64_t item_kv_tiles(const TileOrder& o, int64_t w, bool causal) {
  if (!causal) return o.kv_tiles;
  const int64_t last_key = int64_t(work_item(o, w).tile + 1) * o.rows;  // one past, maybe past N
  return std::min<int64_t>(o.kv_tiles, (last_key + kBc - 1) / kBc);
}

// The busiest block's work over the mean, the blocks taking the items in fixed turns.
inline double busiest_in_turns(const TileOrder& o, int64_t grid, bool causal) {
  std::vector<int64_t> work(grid, 0);
  int64_t total = 0;
  for (int64_t w = 0; w < o.items; ++w) {
    work[w % grid] += item_kv_tiles(o, w, causal);
    total += item_kv_tiles(o, w, causal);
  }
  return double(*std::max_element(work.begin(), work.end())) * grid / double(total);
}

// The same, each block taking the next item of the order when it is done with its last.
inline double busiest_in_order(const TileOrder& o, int64_t grid, bool causal) {
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> free_at;
  for (int64_t k = 0; k < grid; ++k) free_at.push(0);
  int64_t total = 0, last = 0;
  for (int64_t w = 0; w < o.items; ++w) {
    const int64_t done = free_at.top() + item_kv_tiles(o, w, causal);
    free_at.pop();
    free_at.push(done);
    total += item_kv_tiles(o, w, causal);
    last = std::max(last, done);
  }
  return double(last) * grid / double(total);
}

}  // namespace flashlab::gpu::fa3

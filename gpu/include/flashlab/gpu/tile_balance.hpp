// How evenly a grid of persistent blocks shares fa3's work items (tile_schedule.hpp): the
// busiest block's work over the mean, 1 where every block does the same. An item's work is
// counted as the KV tiles it reads, for N_q = N_k: every tile without the mask; under the
// top-left mask (Br = Bc) its query tile's index + 1, so the last query tile of a head reads
// Tr tiles and the first one. An item's own set-up and epilogue are left out. Two ways to
// hand the items out:
//   in turns: block k takes items k, k + grid, k + 2 grid, ... whatever they cost;
//   in order, as blocks free up: each block, when done, takes the next item of the order.
//     That is what the hardware's dispatch does with one block per item;
//   from fa3's work queue (FLASHLAB_FA3_GRID_QUEUE), one block per SM: in order too, but a
//     block claims its next item a little before it is free, when its producer has issued
//     the last loads of its current one: as far ahead of the consumers as the K and V rings
//     allow, `stages` KV tiles (or at the item's start, if it has fewer).
// Host code for the tests and the lessons; plain C++17.
#pragma once

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/tile_schedule.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <vector>

namespace flashlab::gpu::fa3 {

static_assert(kBr == kBc, "a query tile's causal work is its index + 1 KV tiles only if Br = Bc");

// KV tiles item w reads (N_q = N_k; causal: the top-left mask).
inline int64_t item_kv_tiles(const TileOrder& o, int64_t w, bool causal) {
  return causal ? work_item(o, w).tile + 1 : o.tiles;
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

// The same, each block taking the next item of the order `claim_lead` KV tiles before it
// is done with its current one (0: when it is done), and starting it when it is done. Of
// blocks that claim at the same time the one free first goes first, then the lower index.
inline double busiest_in_order(const TileOrder& o, int64_t grid, bool causal,
                               int64_t claim_lead = 0) {
  using Block = std::tuple<int64_t, int64_t, int64_t>;  // (claims its next item, free, index)
  std::priority_queue<Block, std::vector<Block>, std::greater<>> claims;
  for (int64_t k = 0; k < grid; ++k) claims.push({0, 0, k});
  int64_t total = 0, last = 0;
  for (int64_t w = 0; w < o.items; ++w) {
    const auto [claim, start, k] = claims.top();
    const int64_t done = start + item_kv_tiles(o, w, causal);
    claims.pop();
    claims.push({std::max(start, done - claim_lead), done, k});
    total += item_kv_tiles(o, w, causal);
    last = std::max(last, done);
  }
  return double(last) * grid / double(total);
}

// The work queue's: a block's producer claims the next item `stages` tiles ahead.
inline double busiest_in_queue(const TileOrder& o, int64_t grid, bool causal,
                               int stages = kDefaultStages) {
  return busiest_in_order(o, grid, causal, stages);
}

}  // namespace flashlab::gpu::fa3

// Occupancy: how many blocks of a kernel one SM holds at once, from what a block asks for
// (threads, registers per thread, shared memory) and what the SM has (sim::SmLimits, owned by
// the hardware profile); and how a grid of blocks fills the GPU's SMs in waves.
//
// Registers go to a warp in units of the granule, and each of the S schedulers owns R / S of
// the register file and its own warps, so with r registers a thread and W warps a block:
//   registers a warp = roundup(32 r, granule)
//   warps a scheduler holds by registers = floor((R / S) / registers a warp)
//   blocks by registers = floor(S x that / W)
//   blocks by shared memory = floor(shared of the SM / (block's shared + reserved per block))
//   blocks by threads = floor(max threads / threads a block), and the SM's block limit;
// the smallest of the four is the occupancy. A grid of n blocks on P SMs holding b each runs
// in ceil(n / (P b)) waves, and keeps n / (waves x P b) of the slots busy on average.
#pragma once

#include "flashlab/sim/profiles.hpp"

#include <cstdint>
#include <string_view>

namespace flashlab::app {

struct Occupancy {
  int warps_per_block = 0;
  int registers_per_warp = 0;  // as allocated: rounded up to the granule
  int by_registers = 0, by_shared = 0, by_threads = 0, by_blocks = 0;  // blocks per SM
  int blocks = 0;                                                      // the smallest of the four
  std::string_view limit;  // which of them binds: "registers", "shared memory", ...
  int warps_per_sm() const { return blocks * warps_per_block; }
  // Warps each scheduler can pick from (the SM's warps are spread evenly over them).
  double warps_per_scheduler(const sim::SmLimits& sm) const {
    return double(warps_per_sm()) / sm.schedulers;
  }
};

// Throws std::invalid_argument, saying what would be right, for threads not a positive
// multiple of 32 up to the SM's limit, registers outside [1, the most a thread may have], or
// a block asking for more shared memory than the SM has.
Occupancy occupancy(const sim::SmLimits& sm, int threads, int registers_per_thread,
                    std::int64_t shared_per_block);

// The most registers a thread may use for min_blocks blocks of `threads` to fit the register
// file: the budget __launch_bounds__(threads, min_blocks) gives ptxas. Throws
// std::invalid_argument when min_blocks blocks do not fit even at one register a thread.
int register_budget(const sim::SmLimits& sm, int threads, int min_blocks);

// A grid of `blocks` blocks on sm_count SMs that hold blocks_per_sm each.
struct GridFill {
  std::int64_t blocks = 0;
  std::int64_t slots = 0;     // blocks resident at once: sm_count x blocks_per_sm
  std::int64_t waves = 0;     // ceil(blocks / slots)
  std::int64_t sms_busy = 0;  // SMs with work in the first wave: min(blocks, sm_count)
  double slot_share = 0;      // blocks / (waves x slots): the slots kept busy, on average
};
// Throws std::invalid_argument for blocks < 1, sm_count < 1 or blocks_per_sm < 1.
GridFill grid_fill(std::int64_t blocks, int sm_count, int blocks_per_sm);

}  // namespace flashlab::app

#include "12-occupancy/occupancy.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

namespace flashlab::app {

namespace {

constexpr int kWarp = 32;

int round_up(int x, int unit) { return (x + unit - 1) / unit * unit; }

}  // namespace

Occupancy occupancy(const sim::SmLimits& sm, int threads, int registers_per_thread,
                    std::int64_t shared_per_block) {
  if (threads < kWarp || threads % kWarp != 0 || threads > sm.max_threads)
    throw std::invalid_argument(fmt::format(
        "a block of {} threads cannot be placed: use a multiple of {} between {} and {}", threads,
        kWarp, kWarp, sm.max_threads));
  if (registers_per_thread < 1 || registers_per_thread > sm.max_registers_per_thread)
    throw std::invalid_argument(
        fmt::format("{} registers a thread is impossible: a thread has between 1 and {}",
                    registers_per_thread, sm.max_registers_per_thread));
  if (shared_per_block < 0 || shared_per_block + sm.shared_reserved_per_block > sm.shared_bytes)
    throw std::invalid_argument(fmt::format(
        "a block asking for {} bytes of shared memory does not fit an SM of {} bytes ({} of "
        "them reserved per block): ask for at most {}",
        shared_per_block, sm.shared_bytes, sm.shared_reserved_per_block,
        sm.shared_bytes - sm.shared_reserved_per_block));
  Occupancy o;
  o.warps_per_block = threads / kWarp;
  o.registers_per_warp = round_up(kWarp * registers_per_thread, sm.register_granule);
  const int warps_per_scheduler = sm.registers / sm.schedulers / o.registers_per_warp;
  o.by_registers = warps_per_scheduler * sm.schedulers / o.warps_per_block;
  o.by_shared = int(sm.shared_bytes / (shared_per_block + sm.shared_reserved_per_block));
  o.by_threads = sm.max_threads / threads;
  o.by_blocks = sm.max_blocks;
  o.blocks = std::min({o.by_registers, o.by_shared, o.by_threads, o.by_blocks});
  o.limit = o.blocks == o.by_registers ? "registers"
            : o.blocks == o.by_shared  ? "shared memory"
            : o.blocks == o.by_threads ? "threads"
                                       : "blocks";
  return o;
}

int register_budget(const sim::SmLimits& sm, int threads, int min_blocks) {
  for (int r = sm.max_registers_per_thread; r >= 1; --r)
    if (occupancy(sm, threads, r, 0).by_registers >= min_blocks) return r;
  throw std::invalid_argument(fmt::format(
      "{} blocks of {} threads do not fit an SM's {} registers even at one register a thread",
      min_blocks, threads, sm.registers));
}

GridFill grid_fill(std::int64_t blocks, int sm_count, int blocks_per_sm) {
  if (blocks < 1 || sm_count < 1 || blocks_per_sm < 1)
    throw std::invalid_argument(fmt::format(
        "a grid needs at least one block, one SM and one block per SM, not {}, {} and {}", blocks,
        sm_count, blocks_per_sm));
  GridFill g;
  g.blocks = blocks;
  g.slots = std::int64_t(sm_count) * blocks_per_sm;
  g.waves = (blocks + g.slots - 1) / g.slots;
  g.sms_busy = std::min<std::int64_t>(blocks, sm_count);
  g.slot_share = double(blocks) / double(g.waves * g.slots);
  return g;
}

}  // namespace flashlab::app

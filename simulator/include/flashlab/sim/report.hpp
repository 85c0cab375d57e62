// What a simulated run reports: bytes per HBM tensor, work on chip, peak SRAM, tiles.
#pragma once

#include "flashlab/sim/machine.hpp"
#include "flashlab/sim/problem.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string_view>
#include <vector>

namespace flashlab::sim {

struct Report {
  Algorithm algorithm = Algorithm::naive;
  Problem problem{};
  std::optional<TileChoice> tiles{};  // Br, Bc; none for the naive programs
  std::vector<TensorTraffic> tensors{};
  OpCounts ops{};
  Bytes peak_sram = 0;               // 0 for the naive programs: their operators' tiling is
                                     // not modelled
  cpu::TileCounts tile_counts{};     // score tiles computed (and partial) and skipped
  std::int64_t steps = 0;            // loads, stores, computes and skips, as a trace lists them

  Bytes bytes_read() const;
  Bytes bytes_written() const;
  Bytes bytes_total() const { return bytes_read() + bytes_written(); }
  // What reaches HBM's DRAM past the L2 (problem.l2_bytes); the same as above without one.
  Bytes dram_read() const;
  Bytes dram_written() const;
  Bytes dram_total() const { return dram_read() + dram_written(); }
  // The traffic of one tensor by name; throws std::out_of_range if the program has none.
  const TensorTraffic& tensor(std::string_view name) const;
};

// Everything in the report as JSON: inputs, Br and Bc, per-tensor bytes, totals, FLOPs,
// peak SRAM, tiles computed and skipped; with an L2, the DRAM bytes past it too; for a
// kernel mirror, the kernel's facts it ran with.
nlohmann::ordered_json to_json(const Report& report);

}  // namespace flashlab::sim

// What a mirror of a GPU pass reports (the backward's pre-kernel, main kernel and
// post-kernel; the decode's split kernel and combine; the Hopper forward's one kernel): the kernels
// it launches with their grids, the bytes each HBM tensor moves between HBM (at the L2) and the
// SMs, summed over every block of every kernel, and the work on chip. The two-level model without
// an L2: bytes here are what crosses between the L2 and the SMs, as the forward mirrors count them.
//
//   sim::PassReport r = sim::count_backward_kernel(shape, facts);
//   r.tensor("dQ accumulator").read;   r.bytes_total();   r.launches[1].blocks;
#pragma once

#include "flashlab/sim/limits.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/machine.hpp"
#include "flashlab/sim/profiles.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::sim {

// One tensor's distinct bytes that a launch reads or writes: each of its sectors once, however
// often the launch's blocks touch it.
struct Footprint {
  std::string tensor{};
  Bytes bytes = 0;
};

// One kernel launch of the pass and its grid.
struct Launch {
  std::string name{};        // "main", "combine", ...
  std::int64_t blocks = 0;   // thread blocks in the grid
  std::int64_t working = 0;  // of those, the blocks with work (a decode split with keys)
  int threads = 0;           // per block, where the kernel's description gives it
  int per_sm = 1;            // blocks an SM holds at once, where the kernel's facts give it
  // On a GPU of `sm_count` SMs: how many waves of sm_count x per_sm blocks the grid takes,
  // and how many SMs its working blocks keep busy in the first one (the block scheduler
  // spreads a grid over the SMs before it doubles up: docs/IO-LEVELS.md, "Where blocks land").
  std::int64_t waves(int sm_count) const;
  std::int64_t busy_sms(int sm_count) const;
  // What the launch reads and writes, tensor by tensor, each sector once (a reduction's
  // lines are read too: the L2 fetches a line to add to it): what compulsory_dram takes.
  // Empty where the mirror does not book it.
  std::vector<Footprint> reads{}, writes{};
  // The launch's grid as the grid model runs it (grid.hpp): its blocks, the tiles they move
  // and their order, without a GPU (predicted_dram puts it on one). Absent where the mirror
  // gives none (decode's launches; the backward's pre- and post-kernels where their rows a
  // block are not described).
  std::optional<GridProblem> grid{};
};

// One HBM tensor of the pass and the bytes its kernels move across its boundary.
struct PassTensor {
  std::string name{};
  std::string type{};  // "bf16", "fp32", "int32" (a block table)
  std::int64_t elements = 0;
  Bytes read = 0;     // HBM (L2) -> SMs
  Bytes written = 0;  // SMs -> HBM (L2); an atomic add is a read and a write
  Bytes written_by_tma = 0;  // of written, what TMA stores carry (whole lines, from SRAM:
                             // not through the L1's store pipe)
  Bytes written_by_atomics = 0;  // of written, what atomic adds with an answer carry (a work
                                 // queue's claims, kClaimBytes each: no store instruction)
};

struct PassReport {
  std::string pass{};              // "backward", "backward (deterministic)", "decode"
  std::string label{};             // the kernel's facts in brief: "Br 64, Bc 128"
  std::vector<Launch> launches{};  // in launch order
  std::vector<PassTensor> tensors{};
  OpCounts ops{};
  Bytes peak_sram = 0;  // SRAM of one block as the mirror lays it out; 0 where not booked

  Bytes bytes_read() const;
  Bytes bytes_written() const;
  Bytes bytes_written_by_tma() const;
  Bytes bytes_written_by_atomics() const;
  // What the L1's store pipe issues (l1tex__t_sectors_pipe_lsu_mem_global_op_st and _red):
  // the bytes written less TMA's stores and the atomics.
  Bytes bytes_stores_issued() const {
    return bytes_written() - bytes_written_by_tma() - bytes_written_by_atomics();
  }
  Bytes bytes_total() const { return bytes_read() + bytes_written(); }
  // The traffic of one tensor by name; throws std::out_of_range if the pass has none.
  const PassTensor& tensor(std::string_view name) const;
  const Launch& launch(std::string_view name) const;
};

// DRAM bytes from a cold L2, launch by launch, as Nsight Compute measures a pass (it empties
// the L2 before each kernel it profiles): every sector a launch reads comes from DRAM once (its
// compulsory misses), and of the sectors it writes, those beyond what the L2 holds dirty
// (`dirty_room`, whole chip: l2_dirty_room of the profile) reach DRAM while it runs; the rest
// stay dirty in the L2 when it ends, which the kernel's DRAM counter does not see. A floor:
// a line the L2 drops and a block reads again, or a dirty line that reads push out before the
// room is full, add to it (docs/IO-LEVELS.md, "The passes from a cold L2"). Nothing where a
// launch of the pass books no footprint.
struct CompulsoryDram {
  Bytes read = 0, written = 0;
};
CompulsoryDram compulsory_dram(const Launch& launch, Bytes dirty_room);
std::optional<CompulsoryDram> compulsory_dram(const PassReport& report, Bytes dirty_room);

// DRAM bytes from a cold L2, launch by launch, as predicted: where the launch has a grid, the
// grid model's (run_grid on paced_on_gpu(gpu, grid): the L2's partitions, its sets, the blocks
// as the GPU places and paces them), what reached DRAM while the kernel ran, which is what the
// kernel's counters see; else compulsory_dram's floor with the GPU's dirty room. Nothing where
// a launch of the pass has neither. Runs every block's every move through the model: for the
// backward at 16 heads, about 10 s at N = 16,384 and minutes at 65,536. `replacement`: the L2
// under another policy than the profile's, to study the policies (with_replacement).
struct LaunchDram {
  Bytes read = 0, written = 0;
  bool from_grid = false;  // the grid model's figures, not the floor
  Bytes left_dirty = 0;    // the grid model's: what stays dirty in the L2 when the launch ends
};
std::optional<std::vector<LaunchDram>> predicted_dram(
    const PassReport& report, const HardwareProfile& gpu,
    std::optional<L2Replacement> replacement = std::nullopt);
// The pass's DRAM bytes: its launches' summed.
CompulsoryDram total(const std::vector<LaunchDram>& launches);

// t >= max(matrix FLOPs / throughput, exps / exp throughput, bytes / HBM bandwidth), as
// roofline() for a forward program.
Bound roofline(const PassReport& report, const HardwareProfile& profile);

// The report as JSON: pass, label, launches (with waves and busy SMs on the profile, and
// each launch's DRAM floor where the mirror books it), per-tensor bytes, totals, operations and
// the bound. With `grid` (predicted_dram's, one entry a launch), each launch that has a grid
// gets its grid model's DRAM bytes too ("dram_grid").
nlohmann::ordered_json to_json(const PassReport& report, const HardwareProfile& profile,
                               const std::vector<LaunchDram>* grid = nullptr);

// A table for the terminal: the launches with their grids (and, with `grid`, the grid model's
// DRAM bytes of those that have one), then the bytes per tensor.
std::string format_pass_table(const PassReport& report, const HardwareProfile& profile,
                              const std::vector<LaunchDram>* grid = nullptr);

// What every mirror takes, and the checks the mirrors share (each throws
// cpu::InvalidArgument saying what would be right).
// (N_q, N_k and d: kMaxLength and kMaxHeadDim, limits.hpp.)
inline constexpr cpu::Index kMirrorMaxHeadsInAll = cpu::Index{1} << 20;  // batch x heads_q
// low <= value <= max, else "name = value is out of range: the <mirror> mirror takes ...".
void check_mirror_size(std::string_view mirror, std::string_view name, cpu::Index value,
                       cpu::Index low, cpu::Index max);
// heads_kv divides heads_q (GQA) and batch x heads_q is at most kMirrorMaxHeadsInAll.
void check_mirror_heads(cpu::Index batch, cpu::Index heads_q, cpu::Index heads_kv);

}  // namespace flashlab::sim

// Hardware profiles, and the bound they turn counts into:
//   t >= max(matrix FLOPs / matrix throughput, exps / exp throughput, HBM bytes / bandwidth)
// A lower bound, not a prediction: it ignores latency, synchronisation, occupancy and
// whatever does not overlap. Its use is to say which resource binds.
#pragma once

#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/report.hpp"

#include <array>
#include <span>
#include <string_view>
#include <vector>

namespace flashlab::sim {

// Per SM and per clock, the same on compute capability 8.0, 9.0 and 10.0 (CUDA C++
// Programming Guide, "Arithmetic Instructions", the throughput table):
// 32-bit floating-point add, multiply, multiply-add (the FMA units)...
inline constexpr double kFp32FmaPerClockPerSm = 128;
// ...and reciprocal, reciprocal square root, base-2 logarithm, base-2 exponential, sine,
// cosine (the special-function unit, MUFU): an eighth of the FMA units' rate.
inline constexpr double kExpPerClockPerSm = 16;
// Shared memory: 32 banks of 4 bytes, each serving one 4-byte word per clock
// (CUDA C++ Programming Guide, "Shared Memory" of each compute capability).
inline constexpr double kSharedMemoryBytesPerClockPerSm = 32 * 4;
// The most registers one thread can have (CUDA C++ Programming Guide, "Technical
// Specifications per Compute Capability": 255 for every compute capability since 3.5).
inline constexpr int kMaxRegistersPerThread = 255;
// Blackwell's tensor memory (compute capability 10.0; PTX ISA, "Tensor Memory" of the
// tcgen05 instructions): per SM, 128 lanes x 512 columns of 32-bit cells, 256 KiB, where the
// tensor cores write their accumulators instead of into registers.
inline constexpr int kTensorMemoryLanes = 128;
inline constexpr int kTensorMemoryColumns = 512;

// What one SM holds at once: the limits that decide how many blocks of a kernel are resident
// together (CUDA C++ Programming Guide, the technical specifications per compute capability).
struct SmLimits {
  int registers = 0;                // 32-bit registers in the SM's register file
  int register_granule = 0;         // registers are given to a warp in multiples of this
  int max_registers_per_thread = 0;
  int max_threads = 0;              // resident threads
  int max_blocks = 0;               // resident thread blocks
  int schedulers = 0;               // warp schedulers (sub-partitions), each with its own
                                    // quarter of the register file and its own warps
  Bytes shared_bytes = 0;           // shared memory of the SM, all resident blocks together
  Bytes shared_reserved_per_block = 0;  // what the system keeps of it for each resident block
  // The SM's unified data cache: L1 and shared memory are one array, of which the driver
  // sets a carve-out aside as shared memory (one of `carveouts`, ascending) and the rest
  // caches global loads (l1_beside_shared).
  Bytes unified_cache_bytes = 0;
  std::array<Bytes, 10> carveouts{};
  int carveout_count = 0;
};

// The L1 an SM keeps beside `blocks` resident blocks of `shared_per_block` bytes of shared
// memory each: the unified cache less the smallest carve-out that holds their shared memory
// and its reserve (the driver's default: "the shared memory capacity is configured for each
// kernel to avoid shared memory occupancy bottlenecks", NVIDIA's Volta to Hopper tuning
// guides). Throws cpu::InvalidArgument, saying what fits, when no carve-out holds them.
Bytes l1_beside_shared(const SmLimits& sm, int blocks, Bytes shared_per_block);
// How many blocks of `threads` threads and `shared_per_block` bytes of shared memory an SM
// holds by shared memory, threads and its block limit (not registers, which the compiler
// decides): min(floor(shared / (block's + reserve)), floor(max threads / threads), max blocks).
int blocks_by_shared_and_threads(const SmLimits& sm, int threads, Bytes shared_per_block);

// What one L2 partition of the H200 holds dirty at most, measured: a fill of X MiB from every
// SM writes back to DRAM, while it runs, all it writes beyond about 28.4 MiB, and nothing below
// (bench/results/2026-12-04-h200-l2-dirty-writes.csv and -repeat.csv; docs/IO-LEVELS.md, "The
// writes during the kernel"). X less the bytes written is 28.20, 28.46, 28.48 and 28.38 MiB at
// X = 32, 48, 64 and 96, and 28.42 at 32 again: 28.39 MiB on average, so 14.19 MiB for each of
// the two partitions, in 128-byte lines. A figure to set as a profile's l2_dirty_cap; the h200
// profile leaves it out (profiles.cpp says why).
inline constexpr Bytes kH200MeasuredL2DirtyCap = 116'276 * kL2LineBytes;
// The same on an H100 80GB HBM3 (bench/results/h100/2026-12-06-h100-l2-dirty-writes.csv): X less
// the bytes written 24.18, 24.03, 23.85 and 23.79 MiB at X = 32, 48, 64 and 96, 23.96 MiB on
// average, so 11.98 MiB a partition (0.84 of the H200's, as its L2 is 0.83 of the H200's).
inline constexpr Bytes kH100MeasuredL2DirtyCap = 98'143 * kL2LineBytes;

struct HardwareProfile {
  std::string_view name;         // "h200", as the CLI's --profile takes it
  std::string_view description;  // the part and where its figures come from, in brief
  // What the CUDA device's name contains where it is this part ("H200" in "NVIDIA H200"):
  // how `flashlab compare` knows the GPU it runs on. Empty where no device has been matched.
  std::string_view device_name;
  int sm_count = 0;
  Bytes sram_per_sm = 0;         // shared memory one SM offers one thread block (the most
                                 // a block can opt in to, a little below the SM's total)
  Bytes l2_bytes = 0;            // the L2 between HBM and the SMs, whole chip
  // The L2's partitions: each SM is attached to one, and data read by SMs of several
  // partitions is held in each of them (sim::GridProblem::l2_partitions; grid.hpp).
  int l2_partitions = 1;
  // How far a kernel's blocks drift apart: the standard deviation of the log of a block's
  // time per KV tile (sim::GridProblem::block_time_spread, the drift schedule of grid.hpp).
  // 0 where no figure is known: the grid model then runs its blocks in lockstep.
  double block_time_spread = 0;
  // How much faster the oldest of an SM's blocks runs than the others there
  // (sim::GridProblem::older_block_lead, the older_first schedule of grid.hpp). 0 where no
  // figure is known.
  double older_block_lead = 0;
  // Which tile a full L2 partition drops (sim::GridProblem::replacement; grid.hpp).
  L2Replacement l2_replacement = L2Replacement::lru;
  // The lines of a set of that L2 under the sets policy (sim::GridProblem::l2_ways,
  // Problem::l2_ways); kL2Ways where nothing was measured.
  int l2_ways = kL2Ways;
  // Whether a line that SMs of one partition read from DRAM (or write) is held at its home
  // partition too, where it serves their later reads once their own copy is gone
  // (Problem::l2_home_partitions for the naive mirror; GridProblem::l2_home_copies for the
  // grid model of fa2, fa3 and the scalar kernel). Measured where true; false where not.
  bool l2_home_copies = false;
  // The most bytes one L2 partition holds dirty: a write past it has the partition write its
  // oldest dirty lines back to DRAM, keeping them, clean (GridProblem::l2_dirty_cap and
  // Problem::l2_dirty_cap; l2_cache.hpp). 0: no cap, a dirty line stays dirty until its set
  // needs the room; so in every profile here (the H200's figure: kH200MeasuredL2DirtyCap).
  Bytes l2_dirty_cap = 0;
  // The most bytes the whole L2 was measured to hold dirty (the H200's: kH200MeasuredL2DirtyCap
  // in each partition), whether or not l2_dirty_cap has the model apply it; 0 where not
  // measured. l2_dirty_room() reads it.
  Bytes l2_dirty_measured = 0;
  // Where the blocks of a whole first wave land, in grid order: the L2 partition of each
  // block's SM, one digit a block, for kernels of one block an SM ([0], sm_count digits) and
  // of two ([1], 2 sm_count digits). Measured (bench_l2_partitions); empty where not.
  std::array<std::string_view, 2> first_wave_partitions{};
  double hbm_bytes_per_s = 0;    // read + written
  // Bytes per second the L2 delivers to the SMs, whole chip: what a load of a tile that is
  // already in the L2 (a re-read of K or V, lesson 5) moves at, where HBM's figure is for
  // the bytes that come from DRAM.
  double l2_bytes_per_s = 0;
  double matrix_flops_per_s = 0; // dense bf16 tensor-core throughput
  double exp_per_s = 0;          // special-function unit (exp2) throughput, whole chip
  SmLimits sm;                   // what one SM holds at once
};

// What the L2 of `gpu` holds dirty before writes reach DRAM, whole chip: l2_dirty_cap in each
// partition where the profile has a cap, else l2_dirty_measured where measured, else the L2.
Bytes l2_dirty_room(const HardwareProfile& gpu);

// GridProblem::slot_partitions for a kernel of `blocks_per_sm` blocks an SM on `gpu`: the
// profile's measured first wave for that occupancy (block b in slot b mod R), or empty (the
// grid model's b mod P) where it has none.
std::vector<cpu::Index> measured_slot_partitions(const HardwareProfile& gpu, int blocks_per_sm);

// The grid `g` as it runs on `gpu`, the one place the profile's facts enter a GridProblem:
// its SM count, L2 bytes, partitions, replacement, home copies and dirty cap, and the measured
// placement of blocks
// for g.blocks_per_sm (measured_slot_partitions). The kernel's own fields (shape, tiles,
// occupancy, order, L1) are g's, untouched.
GridProblem on_gpu(const HardwareProfile& gpu, GridProblem g);
// on_gpu, and the blocks paced as the profile measured them: where the kernel's steps are
// faster from the L2 than from DRAM (g.l2_step_share < 1, a figure measured for the kernel),
// a head's blocks catching up with each other at the profile's spread of heads' paces
// (GridSchedule::catch_up, block_time_spread); else the older of an SM's blocks ahead
// (GridSchedule::older_first, older_block_lead) where the profile has measured a lead and the
// kernel's K and V bypass the L1 (g.l1_bytes = 0: blocks that share them through their SM's
// L1 stay in step, the one behind hitting there); g's own schedule elsewhere. What `flashlab
// compare` runs a grid on.
GridProblem paced_on_gpu(const HardwareProfile& gpu, GridProblem g);
// g (on `gpu`) under another replacement than the profile's, to study the policies: the
// profile's home copies stay where that replacement can hold them (hashed sets) and go where
// it cannot.
GridProblem with_replacement(const HardwareProfile& gpu, GridProblem g, L2Replacement replacement);

// A100, H100, H200, B200 (sources in profiles.cpp, beside each figure).
std::span<const HardwareProfile> profiles();

// The profile of that name ("a100", "h100", "h200", "b200"); otherwise
// cpu::InvalidArgument listing the names.
const HardwareProfile& find_profile(std::string_view name);

// A link between two GPUs, as a ring of ranks uses it: each rank sends to the next one and
// receives from the previous one at the same time, so what bounds a ring's step is the
// bandwidth of one direction.
struct LinkProfile {
  std::string_view name;         // "nvlink-h200", as the lesson's --link takes it
  std::string_view description;  // the link and where its figure comes from, in brief
  double bytes_per_s = 0;        // one direction, one GPU
};

// NVLink between the H200s of one HGX board and NDR InfiniBand between boards (sources in
// profiles.cpp, beside each figure).
std::span<const LinkProfile> links();

// The link of that name ("nvlink-h200", "ib-ndr"); otherwise cpu::InvalidArgument listing
// the names.
const LinkProfile& find_link(std::string_view name);

struct Bound {
  double matrix_s = 0;  // matrix FLOPs / matrix throughput
  double exp_s = 0;     // exps and logs / exp throughput
  double memory_s = 0;  // HBM bytes (past the L2, if the problem has one) / HBM bandwidth

  double seconds() const;
  std::string_view binding() const;  // "matrix", "exp" or "memory": the largest term
};

// The bound for the whole problem on the whole chip. The other element-wise operations
// (max, sum, rescale, divide) run on the fp32 units, an order of magnitude faster than
// the exp unit, and are left out of the bound.
Bound roofline(const Report& report, const HardwareProfile& profile);
// The same bound for work `ops` that moves `hbm_bytes` (a kernel pass's mirror).
Bound roofline(const OpCounts& ops, Bytes hbm_bytes, const HardwareProfile& profile);

}  // namespace flashlab::sim

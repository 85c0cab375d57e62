#include "flashlab/sim/profiles.hpp"

#include "flashlab/cpu/types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

namespace flashlab::sim {

namespace {

// The L2's read bandwidth to the SMs: 5120 bytes per clock on the A100 (NVIDIA A100 Tensor
// Core GPU Architecture whitepaper, table "A100 vs V100": "L2 Cache Read Bandwidth 5120
// Bytes/clk"). NVIDIA gives no such figure for Hopper or Blackwell; their profiles assume the
// same bytes per clock at their own clock, an estimate until a device run measures it (a
// kernel that reads an L2-resident buffer over and over).
constexpr double kL2BytesPerClock = 5120;

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr Bytes kKB = 1024;  // NVIDIA's "KB" and "MB" of on-chip memory are KiB and MiB
constexpr Bytes kMB = 1024 * kKB;

// CUDA C++ Programming Guide, technical specifications per compute capability: 64 K
// registers per SM, at most 255 per thread, given to warps in units of 256; 2048 threads and
// 32 blocks per SM; 4 warp schedulers; 1 KB of shared memory reserved per block. Compute
// capability 8.0 (A100) has 164 KB of shared memory per SM, 9.0 (H100, H200) and 10.0 (B200)
// 228 KB. The unified data cache and the shared-memory carve-outs it allows: NVIDIA Ampere
// tuning guide, 192 KB, carve-outs 0, 8, 16, 32, 64, 100, 132 or 164 KB; Hopper tuning guide,
// 256 KB, carve-outs as the A100's and 196 or 228 KB (Blackwell's guide: as Hopper's).
constexpr std::array<Bytes, 10> kCarveouts = {0,         8 * kKB,   16 * kKB,  32 * kKB,
                                              64 * kKB,  100 * kKB, 132 * kKB, 164 * kKB,
                                              196 * kKB, 228 * kKB};
constexpr SmLimits sm_limits(Bytes shared_bytes, Bytes unified_cache_bytes) {
  int count = 0;
  while (count < int(kCarveouts.size()) && kCarveouts[count] <= shared_bytes) ++count;
  return {.registers = 64 * 1024,
          .register_granule = 256,
          .max_registers_per_thread = kMaxRegistersPerThread,
          .max_threads = 2048,
          .max_blocks = 32,
          .schedulers = 4,
          .shared_bytes = shared_bytes,
          .shared_reserved_per_block = 1 * kKB,
          .unified_cache_bytes = unified_cache_bytes,
          .carveouts = kCarveouts,
          .carveout_count = count};
}

// How far the H200's blocks drift apart (HardwareProfile::block_time_spread). Fitted on one
// sweep, bench/results/2026-12-01-h200-crossover_h16.csv (fa2, 16 heads, N = 16384 to 131072):
// the sigma of 0.012, 0.014, 0.016, 0.018 with the least mean |log(measured / predicted)| of
// the DRAM reads; checked on the other sweeps in docs/IO-LEVELS.md, where it does not fit
// everywhere. compare draws the scalar kernel's heads' paces with it (catch_up: in its block
// logs the first wave's three heads at N = 8192 ran 20.71 to 21.10 ms, about 1% apart); fa2
// and fa3 run older first (below), without it.
constexpr double kH200BlockTimeSpread = 0.016;
// How much faster the older of an SM's blocks runs (HardwareProfile::older_block_lead): fa2's
// first waves in bench_block_log's logs (bench/results/2026-12-04-h200-fa2-block-log.csv,
// -first-waves-log.csv.gz), the second 132 blocks 4.5 to 5.7% slower than the first 132; the
// older_first schedule, which compare runs for fa2.
constexpr double kH200OlderBlockLead = 0.05;

// The ways of the GH100's L2 sets (HardwareProfile::l2_ways). NVIDIA publishes no
// associativity, and the edges measured say more than kL2Ways' 16: SM 0's chain walked
// through a 30 MiB partition of the H200 lost 0.6% of its lines at 24 MiB, 13% at 28, 67% at
// 32 and 98% at 36, the edge of balls in bins over 64 to 128 ways (16 would lose 22, 43, 63
// and 80%; bench/gpu/NOTES.md, "The room one side of the L2 has"); fa2's and fa3's DRAM reads
// at one head on an H100, N = 32,768 to 53,248 in steps of 2,048, climb as the grid model
// climbs with 64 ways (every row within 15%) and not as with 16 (16 of 22); and every stored
// forward row without the mask fits 64 as well or better ("Ways from the edges"). Yet 16 here:
// the backward with GQA, run again with 64 (and 32), says 16. On the H200 at 16 / 4 heads, N
// = 10,240 to 14,336, the DRAM reads measured are 0.98 to 1.01 of the 16-way grid, 1.16 to
// 1.18 of the 32-way and 1.22 to 1.31 of the 64-way ("The backward's grid with 64 ways"); an
// H100 at N = 6,144 to 12,288, predicted before the run with both, read 0.95 to 1.17 of the
// 16-way grid and 1.23 to 1.75 of the 64-way ("The backward's crossover on an H100"). What
// the sets of 16 stand for there is not associativity alone.
constexpr int kGh100L2Ways = kL2Ways;

// The GH100's first waves, block by block: the partition of the SM each block ran on,
// measured (the profiles' first_wave_partitions): on the H200 (bench/results/2026-12-03-h200-
// l2-partitions.csv) and on an H100 80GB HBM3 (2026-12-06-h100-l2-partitions.csv), the same
// digits, every SM on the same side: the two parts share the chip and its floorplan.
constexpr std::string_view kGh100FirstWave1 =
    "0000000000000000111111111111111111111111111111111111111111111111"
    "0000000000000000000000000000000000000000000000000011111111111111"
    "1111";
constexpr std::string_view kGh100FirstWave2 =
    "0000000000000000111111111111111111111111111111111111111111111111"
    "0000000000000000000000000000000000000000000000000000000000111111"
    "1111111111110000000011111111111111111111111111111111111111111111"
    "1111000000000000000000000000000000000000000000000000001111111111"
    "11111111";

constexpr std::array kProfiles = {
    HardwareProfile{
        .name = "a100",
        .description = "NVIDIA A100 SXM4 80GB (datasheet figures)",
        .device_name = "A100-SXM4-80GB",  // its CUDA name: "NVIDIA A100-SXM4-80GB"
        .sm_count = 108,                  // NVIDIA A100 Tensor Core GPU Architecture whitepaper
        // CUDA Programming Guide, compute capability 8.0: 164 KB per SM, 163 KB per block.
        .sram_per_sm = 163 * kKB,
        .l2_bytes = 40 * kMB,                               // A100 whitepaper: 40 MB L2
        .hbm_bytes_per_s = 2039 * kGiga,                    // A100 datasheet, 80GB SXM: 2,039 GB/s
        .l2_bytes_per_s = kL2BytesPerClock * 1.41 * kGiga,  // at the 1410 MHz boost
        .matrix_flops_per_s = 312 * kTera,                  // A100 datasheet: BF16 312 TFLOPS dense
        .exp_per_s = kExpPerClockPerSm * 108 * 1.41 * kGiga,  // 1410 MHz boost (whitepaper)
        .sm = sm_limits(164 * kKB, 192 * kKB)},
    HardwareProfile{
        .name = "h100",
        .description = "NVIDIA H100 SXM5 80GB (datasheet ceilings; its L2 measured)",
        .device_name = "H100 80GB HBM3",  // the SXM5 part's CUDA name ("NVIDIA H100 80GB HBM3")
        .sm_count = 132,                  // NVIDIA H100 datasheet / Hopper architecture whitepaper
        // CUDA Programming Guide, compute capability 9.0: 228 KB per SM, 227 KB per block.
        .sram_per_sm = 227 * kKB,
        // Hopper architecture whitepaper: 50 MB L2 (H100 SXM5); measured: 52,428,800 bytes
        // (cudaDevAttrL2CacheSize, 2026-12-06).
        .l2_bytes = 50 * kMB,
        // Hopper whitepaper: the L2 is divided into two partitions, each caching data for
        // the GPCs attached to it directly.
        .l2_partitions = 2,
        // The blocks' paces: the H200's figures, not measured on an H100. The two parts share
        // the chip, its SMs and its block scheduler; their clocks and memory differ, which
        // these shares of a block's time leave out.
        .block_time_spread = kH200BlockTimeSpread,
        .older_block_lead = kH200OlderBlockLead,
        // As the H200's: the GH100's L2 in hashed sets, each line read or written held at its
        // home partition too. Home copies measured on an H100 (bench/gpu/NOTES.md, "Do one
        // side's lines take room on the other?", results/h100/2026-12-05-h100-l2-home.csv).
        .l2_replacement = L2Replacement::sets,
        .l2_ways = kGh100L2Ways,
        .l2_home_copies = true,
        .l2_dirty_measured = 2 * kH100MeasuredL2DirtyCap,
        .first_wave_partitions = {kGh100FirstWave1, kGh100FirstWave2},
        // H100 SXM datasheet: 3.35 TB/s. Measured on an H100 80GB HBM3 (2026-12-06, torch's
        // copy of 1 GiB timed by do_bench, bytes read + written): 3.02 TB/s.
        .hbm_bytes_per_s = 3.35 * kTera,
        .l2_bytes_per_s = kL2BytesPerClock * 1.98 * kGiga,  // an estimate; 1980 MHz boost
        // H100 SXM datasheet: BF16 989 TFLOPS dense, the figure used here (its 1,979
        // TFLOPS is with 2:4 sparsity, which attention does not use). Measured on an H100
        // 80GB HBM3 (2026-12-06, bf16 GEMM 8192^3 through torch): 684 TFLOP/s. Lesson 15
        // sets the datasheet's rates of the H100 and the B200 side by side.
        .matrix_flops_per_s = 989 * kTera,
        // FlashAttention-3 (Shah et al., 2024): "989 TFLOPS of FP16 matmul but only 3.9
        // TFLOPS of special functions" on the H100 SXM5.
        .exp_per_s = 3.9 * kTera,
        .sm = sm_limits(228 * kKB, 256 * kKB)},
    HardwareProfile{
        .name = "h200",
        .description = "NVIDIA H200 SXM 141GB (measured ceilings, ANCHORS.md)",
        .device_name = "H200",
        .sm_count = 132,  // the H200 measured in docs/ANCHORS.md
        // Measured: 232,448 bytes (227 KiB) per block with the opt-in attribute (DEVICE-NOTES.md).
        .sram_per_sm = 227 * kKB,
        .l2_bytes = 60 * kMB,  // measured: 62,914,560 bytes (DEVICE-NOTES.md, ANCHORS.md)
        // The GH100's two partitions (as the H100); the DRAM reads measured past the
        // crossover fit two of 30 MiB, K and V held in both (docs/IO-LEVELS.md).
        .l2_partitions = 2,
        .block_time_spread = kH200BlockTimeSpread,
        .older_block_lead = kH200OlderBlockLead,
        // 128-byte lines in hashed sets with the measured placement below: every DRAM read of
        // the 2026-12-03 compare sweeps of fa2, fa3 and the scalar kernel within 15% (LRU
        // missed fa3 at 16 heads, N = 8192, by 1.28), fa3's eight sections calls within 8%
        // (fa3_dram_vs_measured), fa2's stored rows 72 of 76 (grid_vs_measured; LRU with blocks
        // alternating, 71).
        .l2_replacement = L2Replacement::sets,
        .l2_ways = kGh100L2Ways,
        // A line one side reads from DRAM is held at its home partition too: SM 0's own chain
        // of 36 to 56 MiB, lost from its partition, came half from the other one and half from
        // DRAM, and all from DRAM from 64 MiB, where its half homed across outgrows that side's
        // 30 MiB (bench/gpu/NOTES.md, "The room one side of the L2 has"); the naive softmax's
        // traffic on one side alone loses its later passes from 28 MiB of rows in flight and at
        // most half of them from DRAM, on both sides from 19 MiB a side, all of them
        // (docs/IO-LEVELS.md, "Home copies").
        .l2_home_copies = true,
        // No dirty cap in the grid model (l2_dirty_cap 0), though one is measured
        // (kH200MeasuredL2DirtyCap): fa2's DRAM bytes do not move with it (docs/IO-LEVELS.md,
        // "The writes during the kernel"). The figure stays as what the L2 holds dirty
        // (l2_dirty_room), for the passes' compulsory DRAM and the naive mirror's cap, whose
        // launches write far past it ("The naive kernel's writes: the whole L2 and its dirty
        // cap"): the measured figure is a partition's, and the H200 has two (l2_partitions).
        .l2_dirty_measured = 2 * kH200MeasuredL2DirtyCap,
        // bench/results/2026-12-03-h200-l2-partitions.csv (bench_l2_partitions): blocks go to
        // the SMs two at a time, GPC after GPC, so runs of 8 to 58 consecutive blocks share a
        // partition (docs/IO-LEVELS.md, "Where blocks land").
        .first_wave_partitions = {kGh100FirstWave1, kGh100FirstWave2},
        // Measured device-to-device copy, bytes read + written (ANCHORS.md); the
        // datasheet says 4.8 TB/s.
        .hbm_bytes_per_s = 4.25 * kTera,
        // An estimate, as the H100's: 1980 MHz is the H200's highest clock (nvidia-smi).
        .l2_bytes_per_s = kL2BytesPerClock * 1.98 * kGiga,
        // Measured bf16 GEMM 8192^3 through cuBLAS (ANCHORS.md); the datasheet says 989
        // TFLOPS dense, as the H100.
        .matrix_flops_per_s = 686 * kTera,
        .exp_per_s = 3.9 * kTera,  // the same GH100 chip as the H100 SXM5 (FlashAttention-3)
        .sm = sm_limits(228 * kKB, 256 * kKB)},
    HardwareProfile{
        .name = "b200",
        .description = "NVIDIA B200 (datasheet figures; exp throughput estimated)",
        .device_name = "B200",
        .sm_count = 148,  // NVIDIA Blackwell architecture technical brief
        // CUDA Programming Guide, compute capability 10.0: 228 KB per SM, 227 KB per block.
        .sram_per_sm = 227 * kKB,
        // NVIDIA's datasheets give no L2 size. 126 MB is what Chips and Cheese measured on a
        // B200 ("Nvidia's B200: Keeping the CUDA Juggernaut Rolling", 2025), read here as
        // MiB like NVIDIA's own figures. It is split between the two dies, half beside each;
        // the model treats it as one pool, so it errs towards hits where K and V outgrow a half.
        .l2_bytes = 126 * kMB,
        .hbm_bytes_per_s = 8 * kTera,                      // HGX B200 datasheet: 8 TB/s per GPU
        .l2_bytes_per_s = kL2BytesPerClock * 1.9 * kGiga,  // an estimate, as the H100's
        // HGX B200 datasheet: BF16 4.5 PFLOPS with sparsity, so 2.25 dense; ANCHORS.md's
        // FlashAttention-4 figure (1613 TFLOPS = 71% of peak) agrees.
        .matrix_flops_per_s = 2250 * kTera,
        // An estimate: 16 per clock per SM x 148 SMs x about 1.9 GHz, a boost clock that
        // NVIDIA's datasheet does not state.
        .exp_per_s = kExpPerClockPerSm * 148 * 1.9 * kGiga,
        .sm = sm_limits(228 * kKB, 256 * kKB)},
};

constexpr std::array kLinks = {
    // NVIDIA H200 datasheet (HGX H200): "NVLink: 900GB/s" per GPU, the sum of both
    // directions over its 18 NVLink 4 links; a ring sends one way, so half of it.
    LinkProfile{.name = "nvlink-h200",
                .description = "NVLink 4 in an HGX H200 board: 900 GB/s per GPU, both directions",
                .bytes_per_s = 900 * kGiga / 2},
    // NVIDIA ConnectX-7 / Quantum-2 NDR InfiniBand: 400 Gb/s per port and direction; one
    // port per GPU, as HGX systems pair them.
    LinkProfile{.name = "ib-ndr",
                .description = "NDR InfiniBand, one 400 Gb/s port per GPU, each direction",
                .bytes_per_s = 400 * kGiga / 8},
};

}  // namespace

Bytes l1_beside_shared(const SmLimits& sm, int blocks, Bytes shared_per_block) {
  const Bytes needed = Bytes(blocks) * (shared_per_block + sm.shared_reserved_per_block);
  for (int i = 0; i < sm.carveout_count; ++i)
    if (sm.carveouts[i] >= needed) return sm.unified_cache_bytes - sm.carveouts[i];
  throw cpu::InvalidArgument(fmt::format(
      "{} blocks of {} bytes of shared memory (and {} reserved each) need {} bytes: an SM's "
      "largest carve-out is {} bytes",
      blocks, shared_per_block, sm.shared_reserved_per_block, needed,
      sm.carveout_count > 0 ? sm.carveouts[sm.carveout_count - 1] : 0));
}

int blocks_by_shared_and_threads(const SmLimits& sm, int threads, Bytes shared_per_block) {
  if (threads < 1 || threads > sm.max_threads || shared_per_block < 0)
    throw cpu::InvalidArgument(fmt::format(
        "a block of {} threads and {} bytes of shared memory: give 1 to {} threads and a "
        "shared memory size >= 0",
        threads, shared_per_block, sm.max_threads));
  const Bytes per_block = shared_per_block + sm.shared_reserved_per_block;
  const Bytes by_threads = std::min<Bytes>(sm.max_threads / threads, sm.max_blocks);
  // A block that takes no shared memory at all (nor any reserve) is not limited by it.
  return int(per_block > 0 ? std::min(sm.shared_bytes / per_block, by_threads) : by_threads);
}

std::span<const LinkProfile> links() { return kLinks; }

const LinkProfile& find_link(std::string_view name) {
  std::string names;
  for (const auto& link : kLinks) {
    if (link.name == name) return link;
    names += names.empty() ? "" : ", ";
    names += link.name;
  }
  throw cpu::InvalidArgument("unknown link '" + std::string(name) + "': the simulator knows " +
                             names);
}

std::span<const HardwareProfile> profiles() { return kProfiles; }

std::vector<cpu::Index> measured_slot_partitions(const HardwareProfile& gpu, int blocks_per_sm) {
  if (blocks_per_sm < 1 || blocks_per_sm > int(gpu.first_wave_partitions.size())) return {};
  const std::string_view wave = gpu.first_wave_partitions[std::size_t(blocks_per_sm - 1)];
  std::vector<cpu::Index> slots;
  slots.reserve(wave.size());
  for (const char digit : wave) slots.push_back(digit - '0');
  return slots;
}

Bytes l2_dirty_room(const HardwareProfile& gpu) {
  if (gpu.l2_dirty_cap > 0) return gpu.l2_dirty_cap * gpu.l2_partitions;
  return gpu.l2_dirty_measured > 0 ? gpu.l2_dirty_measured : gpu.l2_bytes;
}

GridProblem on_gpu(const HardwareProfile& gpu, GridProblem g) {
  g.sm_count = gpu.sm_count;
  g.l2_bytes = gpu.l2_bytes;
  g.l2_partitions = gpu.l2_partitions;
  g.replacement = gpu.l2_replacement;
  g.l2_ways = gpu.l2_ways;
  g.l2_home_copies = gpu.l2_home_copies;
  g.l2_dirty_cap = gpu.l2_dirty_cap;
  g.slot_partitions = measured_slot_partitions(gpu, int(g.blocks_per_sm));
  return g;
}

GridProblem paced_on_gpu(const HardwareProfile& gpu, GridProblem g) {
  g = on_gpu(gpu, std::move(g));
  if (g.l2_step_share < 1) {
    g.schedule = GridSchedule::catch_up;
    g.block_time_spread = gpu.block_time_spread;
  } else if (gpu.older_block_lead > 0 && g.l1_bytes == 0) {
    g.schedule = GridSchedule::older_first;
    g.older_block_lead = gpu.older_block_lead;
  }
  return g;
}

GridProblem with_replacement(const HardwareProfile& gpu, GridProblem g, L2Replacement replacement) {
  g.replacement = replacement;
  g.l2_home_copies = gpu.l2_home_copies && replacement == L2Replacement::sets;
  return g;
}

const HardwareProfile& find_profile(std::string_view name) {
  std::string names;
  for (const auto& p : kProfiles) {
    if (p.name == name) return p;
    names += names.empty() ? "" : ", ";
    names += p.name;
  }
  throw cpu::InvalidArgument("unknown hardware profile '" + std::string(name) +
                             "': the simulator knows " + names);
}

double Bound::seconds() const { return std::max({matrix_s, exp_s, memory_s}); }

std::string_view Bound::binding() const {
  if (memory_s >= matrix_s && memory_s >= exp_s) return "memory";
  return matrix_s >= exp_s ? "matrix" : "exp";
}

Bound roofline(const OpCounts& ops, Bytes hbm_bytes, const HardwareProfile& profile) {
  return {static_cast<double>(ops.matrix_flops) / profile.matrix_flops_per_s,
          static_cast<double>(ops.exp) / profile.exp_per_s,
          static_cast<double>(hbm_bytes) / profile.hbm_bytes_per_s};
}

Bound roofline(const Report& report, const HardwareProfile& profile) {
  return roofline(report.ops, report.dram_total(), profile);
}

}  // namespace flashlab::sim

// The lessons' view of gpu/'s kernel table (flashlab/gpu/kernel_info.hpp, the one owner of
// what each kernel is; it builds without CUDA, so a machine without a GPU lists and
// predicts the same kernels), and the one translation of the CPU reference's causal
// alignment into flashlab.h's.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/flashlab.h"
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/fa3_kernel.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/problem.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"
#include "gpu_bridge/measured_h200.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app {

using cpu::Index;

// The ladder's names, simplest kernel first.
std::vector<std::string> kernel_names();
// "naive,scalar,fa2": the default of options that take a list of kernels.
std::string kernel_list();
std::optional<flashlab_kernel> kernel_by_name(std::string_view name);
// "unknown GPU kernel `x`: the kernels are naive, scalar, fa2, fa3"
std::string unknown_kernel_message(std::string_view name);

// Why the kernel does not take this d and dtype (the table's sentence), or "" when it does.
std::string kernel_refusal(std::string_view kernel, cpu::Index d, sim::DType dtype);

// The simulator's mirror of a kernel as built: the program that moves its bytes, and the
// problem set up with the kernel's own facts from the table (its tiles, the dtype its score
// tile is kept in); or, for the Hopper kernel, its own counted mirror (sim::count_fa3_kernel)
// and its facts. Without either, why_not says why (the kernel does not take this d or dtype).
struct KernelMirror {
  std::optional<sim::Algorithm> algorithm;
  sim::Problem problem;  // the caller's problem with the kernel's facts filled in
  std::string why_not;
  // The occupancy the grid model runs it at: the one it is built for, or, where it asks for
  // none but has tiles (the scalar kernel), what shared memory, threads and the block limit
  // allow (its registers allow more blocks than its shared memory does); 0: no grid.
  Index blocks_per_sm = 0;
  // Each SM's L1 beside that many blocks' shared memory, where K and V pass it (the scalar
  // kernel built with plain loads: plain_loads below); else 0.
  sim::Bytes l1_bytes = 0;
  // Where its blocks wait for their loads (gpu::KernelConfig::kv_loads_wait): a step's time
  // where the L2 holds its tiles, as a share of one whose tiles come from DRAM
  // (measured::kScalarL2StepShare; the grid then runs the heads' blocks catching up,
  // sim::GridSchedule::catch_up); else 1.
  double l2_step_share = 1;
  // Under the causal mask, whether block x of a head runs query tile Tr - 1 - x (fa2's) or x
  // (gpu::KernelConfig::causal_longest_first).
  bool causal_longest_first = true;
  std::optional<sim::Fa3KernelFacts> fa3{};  // set for fa3 (then algorithm is empty)
  // What the mirror takes from another shape than the one asked (the naive kernel's cuBLAS
  // tiles, cublas_tiles), for the reader to weigh its figures by; "" where nothing.
  std::string assumption{};

  bool modelled() const { return algorithm || fa3; }
};
// problem: N, d, dtype, causal, SRAM and L2 as the caller wants them simulated.
// For the scalar and fa2 kernels the problem carries their epilogues' warp stores of O and
// L (KernelConfig::o_store, lse_store), so their writes are booked as the sectors they send.
// The naive kernel's GEMMs take the output tiles cuBLAS was seen to choose for the shape
// (cublas_tiles), `heads` being the batch count cuBLAS sees; its L2 keeps lines as the
// target profile's does, but LRU where the softmax's rows in flight hold
// kNaiveLruFromRoomMultiple times its room or more (there every replacement drops their later
// passes, and LRU's steady state counts that in milliseconds where a record per line would
// take minutes; the sets with the profile's home copies read within 1.1% of it at the switch,
// tests/lessons/test_cli_passes.cpp).
inline constexpr Index kNaiveLruFromRoomMultiple = 2;
// plain_loads: the scalar kernel as bench_scalar_block_log builds it, K and V by plain loads
// through the L1 (FLASHLAB_SCALAR_PLAIN_LOADS, 02_tiled_scalar.cu), where the library's
// bypass it; why_not says so for another kernel.
KernelMirror kernel_mirror(std::string_view kernel, const sim::Problem& problem, Index heads = 1,
                           bool plain_loads = false);
// The naive mirror's L2 policy: `replacement`, with the target profile's home copies where
// that policy can hold them (hashed sets; Problem::l2_home_partitions). kernel_mirror sets it
// so; a caller that tries the mirror under another policy sets it here too.
void set_naive_l2_policy(sim::Problem& problem, sim::L2Replacement replacement);

// The tiles cuBLAS chose for the naive kernel's GEMMs on the H200 (measured_h200.hpp): at
// this shape where a run has read them (exact), else at the nearest shape read with the same
// d: the least sum of N's and heads' ratios as powers of two (cuBLAS sizes its tiles to the
// batch's whole work; docs/IO-LEVELS.md, "The naive kernel: cuBLAS's tiles", measured two
// rules on shapes never read), then the nearer N; else none (fp16 and fp32: nothing read).
struct CublasTilesFound {
  const measured::CublasTiles* tiles = nullptr;
  bool exact = false;
  // "", or what the mirror assumes where the tiles are not this shape's own.
  std::string assumption() const;
};
CublasTilesFound cublas_tiles(Index n, Index d, Index heads, sim::DType dtype);

// The fa3 kernel's facts from the table (its tiles, ring, SRAM layout) with `stages` K and V
// buffers (0: the kernel's default), or why it does not take (d, dtype) or that many stages.
struct Fa3Facts {
  std::optional<sim::Fa3KernelFacts> facts;
  std::string why_not;
};
Fa3Facts fa3_kernel_facts(Index d, sim::DType dtype, Index stages = 0);

// Whether fa3's launch with its default options (fa3::kDefaultGrid, resolved for the shape's
// tile order by fa3::resolve_grid) has its blocks claim their items from the work queue: what
// sim::Fa3KernelFacts::work_queue books for that shape.
bool fa3_takes_from_queue(const sim::Fa3Shape& shape, const sim::Fa3KernelFacts& facts);

// fa3's mirror for a shape as its launch runs it: `facts` on the grid the launch resolves
// (work_queue from fa3_takes_from_queue). What `compare` and `simulate --pass fa3` count.
sim::PassReport count_fa3_as_launched(const sim::Fa3Shape& shape, sim::Fa3KernelFacts facts);

// A kernel's warp store as the table states it (kernel_info.hpp), in the simulator's terms;
// nothing where the table describes none (all zero: a library's kernel).
std::optional<sim::WarpStore> sim_store(const gpu::WarpStorePattern& pattern);

// The caller's problem with the tiles (Br, Bc) and score dtype of flashlab's fa2 kernel, for
// the simulator's FlashAttention-2 program: the lessons' FA2 uses the tile rule its kernel
// uses, not the first paper's (and counts O and L as bytes of data, as the paper does). Throws
// cpu::InvalidArgument with the kernel table's reason when fa2 does not take the problem's d and
// dtype.
sim::Problem fa2_kernel_problem(const sim::Problem& problem);

// The profile of the GPU the kernels' mirrors predict for: every prediction of a mirror is
// made on its SRAM, its SMs and its L2. The H200 (the card the kernels are tuned and measured
// on, and the one the lessons speak of) unless set_target_profile chose another.
const sim::HardwareProfile& target_profile();
inline constexpr std::string_view kDefaultTarget = "h200";

// The targets a mirror can predict for: the profiles of the GPUs the kernels are built for
// (sm_90a) whose L2 has been measured (a first wave's placement, HardwareProfile::
// first_wave_partitions): "h100", "h200".
std::vector<std::string_view> target_names();

// Makes the profile `name` the target for the rest of the process (`flashlab compare
// --profile`, or the GPU it runs on). Throws cpu::InvalidArgument naming target_names()
// where `name` is not one of them.
void set_target_profile(std::string_view name);

// The target whose device_name a CUDA device's name contains ("NVIDIA H100 80GB HBM3" ->
// "h100"), or "" where none does.
std::string_view target_of_device(std::string_view device);

// One run of one kernel: batch 1, `heads` heads (copies of the same Q, K, V in memory of
// their own), N_q queries against N keys.
struct KernelRun {
  std::string kernel;
  Index n = 1024, n_q = 0, d = 64, heads = 1;  // n_q = 0: N_q = N
  std::string dtype = "bf16";
  bool causal = false;
  std::uint64_t seed = 0;
  // The scalar kernel with plain loads, whose K and V pass the L1 (kernel_mirror).
  bool plain_loads = false;
  // Where and when a GPU ran each block (one entry per block in grid order): the grid model
  // then replays it (sim::GridSchedule::logged) instead of placing the blocks itself.
  std::vector<sim::LoggedBlock> block_log{};
  // fa3: its tile order's share of the L2 in percent (flashlab_fa3_options.kv_l2_share), or
  // FLASHLAB_FA3_AUTO for the kernel's own; the grid model runs the same order.
  std::int32_t fa3_kv_l2_share = FLASHLAB_FA3_AUTO;

  Index queries() const { return n_q > 0 ? n_q : n; }
  // With N_q != N a causal mask must say how queries align with keys: decoding against a
  // cache needs the last query to see every key (bottom-right).
  cpu::Causal alignment() const;
};

// The mirror's count for one head, on one SM's SRAM, with the target's L2 in front of HBM;
// the run's figures are it times the heads (each head's blocks move their own tiles). For
// fa3, its own mirror's count of every head (any N_q), in `pass`.
// DRAM: for a kernel built for an occupancy (fa2), its whole grid run through the target's
// shared L2 (sim::run_grid: SMs, blocks in waves, write-back), where the DRAM write figure
// is what the kernel writes while it runs and what it leaves dirty is apart; otherwise one
// head's program through the L2 as one SM would, times the heads, all written back (the naive
// kernel: its launches each cold, its softmax's resident rows in flight; kernel_mirror).
struct Prediction {
  std::string kernel;  // "fa2"
  std::string label;   // "fa2 (Br 128, Bc 64)"
  std::optional<sim::Report> report;
  Index heads = 1;
  std::string why_not;                          // when there is no report
  std::optional<sim::GridReport> grid{};        // the grid through the shared L2
  std::optional<sim::L2Crossover> crossover{};  // where its K and V stop fitting the L2
  std::optional<sim::PassReport> pass{};        // fa3's mirror, all heads
  std::string assumption{};                     // KernelMirror::assumption
  // The catch_up schedule's draws (kPaceDraws, below): the least and the most bytes into the
  // SMs among them; 0 under any other schedule.
  double sm_read_low = 0, sm_read_high = 0;
  // What the heads' L stores touch beyond one head's times the heads: each head's L (fp32,
  // N_q rows) starts where the one before ends, past a sector boundary where 8 does not
  // divide N_q, and a run of its stores then touches a sector more (sim::bytes_out_of_heads).
  // 0 for fa3, whose mirror counts every head itself.
  double sm_written_past_boundaries = 0;

  bool modelled() const { return report || pass; }
  // DRAM is predicted by the grid, or by one head's program through the L2.
  bool dram_modelled() const { return grid || report; }
  double sm_read() const;
  // The store and reduction sectors its warp instructions touch, in bytes: what the L1 issues
  // (Nsight Compute's l1tex__t_sectors_pipe_lsu_mem_global_op_st + _red, x 32 B); what
  // leaves the SMs is that or less (ncu_bytes.hpp).
  double sm_written() const;
  // Of those, the bytes TMA stores carry from SRAM (fa3's O): outside the L1's store pipe, so
  // not among the store sectors ncu counts there; whole lines, so all of them leave the SMs.
  double sm_written_by_tma() const;
  double sm_written_by_atomics() const;  // a work queue's claims (sim::kClaimBytes each)
  // What the L1's store pipe issues: the writes less TMA's stores and the atomics
  // (sim::PassReport::bytes_stores_issued); all of them for a one-head mirror.
  double sm_stores_issued() const;
  double dram_read() const;
  double dram_written() const;  // during the kernel
  double left_dirty() const;    // in the L2 at the kernel's end (0 without the grid model)
  double dram() const { return dram_read() + dram_written(); }
};

// How many draws of the heads' paces a prediction under the catch_up schedule runs (seeds 0 to
// kPaceDraws - 1); the draw whose bytes into the SMs are the median is the prediction.
inline constexpr int kPaceDraws = 5;

Prediction predict(const KernelRun& run);

flashlab_dtype c_dtype(sim::DType dtype);
flashlab_causal c_causal(cpu::Causal causal);

}  // namespace flashlab::app

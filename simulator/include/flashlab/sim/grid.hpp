// The L2 as a whole GPU shares it: a FlashAttention-2 kernel's grid of thread blocks run as
// the hardware runs it, to predict the bytes that reach DRAM.
//
// The grid: one block per (head, query tile), block id b = head * Tr + i (the kernel's
// blockIdx.x is the query tile, y the head, z the batch; heads here counts batch x heads).
// A causal kernel runs query tile Tr - 1 - x at blockIdx.x = x, longest first (a kernel that
// runs tile x, the scalar kernel, says so: causal_longest_first). R =
// sm_count x blocks_per_sm blocks are resident at once; the block scheduler hands out block
// ids in increasing order as slots free, so blocks start in waves, in grid order. (A kernel
// with a scheduler of its own, fa3's, gives its (head, query tile) per block instead:
// GridProblem::order. Its persistent blocks take items k, k + R, ..., which with items of
// equal length is the same as slots freeing in item order.) The
// resident blocks advance together, one KV step at a time: in each step every resident
// block, in block-id order, loads K_j and then V_j of its KV head (a round-robin
// interleaving of their accesses). A block loads Q_i when it starts and stores O_i and L_i
// when it ends. Every access goes through one L2 shared by all SMs.
//
// Queries and keys (GridProblem::N_q). N is the keys of a head and N_q its queries (N where
// not given): Q, O and L (the backward's dO, D, the dQ accumulator and dQ) have N_q rows a
// head, K and V (dK, dV) N. Under the causal mask query i sees key j when j <= i + N - N_q
// (bottom-right) or j <= i (top-left), the kernels' two alignments. A query tile walks the
// KV tiles up to its last row's last key, and none where no row of it sees a key
// (bottom-right with N_q > N): its block loads Q_i and stores O_i and L_i all the same, as
// the kernels do. A block without steps ends as it starts, in every schedule, and its slot
// is free for the next block at once.
//
// The L2: least recently used (or random victims, or lines in hashed sets: L2Replacement,
// flashlab/sim/l2_policy.hpp), write-back,
// write-allocate, its entries whole tiles (the unit the blocks move). DRAM moves whole
// 32-byte sectors: a tile of rows [r0, r0 + rows)
// of a tensor whose rows are rb bytes occupies sectors floor(r0 rb / 32) .. ceil((r0 +
// rows) rb / 32) - 1, and that is what a miss reads and a write-back writes. (Where rb x
// rows is not a multiple of 32, neighbouring tiles share a sector and each counts it: the
// model's one over-count, at most 32 bytes per tile boundary. At d = 64 and 128 in bf16
// every tile is whole sectors.) The real L2 is set-associative and hashed over its slices;
// this model is fully associative and exact LRU by default (the sets policy, an option,
// models the sets; docs/IO-LEVELS.md says how it fares).
//
// Partitions (l2_partitions = P, the hardware profile's figure: 2 on Hopper). The L2 is P
// separate caches of l2_bytes / P each, and every SM is attached to one of them. By default
// block b runs on an SM of partition b mod P, so that a head's many blocks land on both
// sides. The H200 measured otherwise (docs/IO-LEVELS.md, "Where blocks land"): its block
// scheduler deals blocks to pairs of SMs GPC after GPC, and consecutive blocks share a
// partition in runs of 8 to 58; GridProblem::slot_partitions takes that placement (the
// hardware profile's, sim::measured_slot_partitions), and `flashlab compare` runs it. A
// block's read looks in its own partition; on a miss the tile is copied from another
// partition that holds it (no DRAM traffic) or else read from DRAM, and either way it is then
// held in the reader's
// partition too. So K and V, which every block of a head reads, take room in every
// partition: for them the L2 holds l2_bytes / P, not l2_bytes. A write is placed in the
// writer's partition only (each O and L tile is written once, by one block, and never
// read, so no other copy exists to update).
//
// Home copies (l2_home_copies, the H200 profile's; docs/IO-LEVELS.md, "Home copies", measured
// them). Every line has a home partition, by a hash standing for the hardware's hash of
// physical addresses (sim::l2_line_home). A line that a block reads from DRAM, or writes, is
// held at its home as well as in the block's partition: there, clean, it serves the later
// reads of that partition's blocks once their own copy is gone, without DRAM. With them the
// far rule above goes line by line (each line from the block's partition, else copied from
// one that holds it, else from DRAM), since a line's home, and so what another partition
// holds of a tile, is the line's own. The hand-worked grids of tests/simulator/test_grid_homes.cpp
// count it.
//
// Closed forms (non-causal, H heads sharing H_kv KV heads, s bytes per element, Tr =
// ceil(N / Br), Tc = ceil(N / Bc)): into the SMs, Q, O and L once per head, and K and V
// once per query tile: H Tr (2 N d s) of K and V. From DRAM: Q once, and K and V of a KV
// head once per wave that runs its blocks when they no longer stay in the L2 from one wave
// to the next, once in all while they do. Written to DRAM during the kernel: the dirty
// tiles of O and L that are evicted before it ends; the rest stay dirty in the L2
// (dirty_at_end), and the hardware's DRAM write counter, read at the kernel's end, does not
// see them.
//
// The schedule. lockstep (the default, what the lessons teach and the closed forms below
// assume): the resident blocks step together, as above. drift: every block at its own pace.
// Block b takes tau_b = exp(sigma z_b) units of time per KV tile, z_b a standard normal drawn
// once per block from (seed, b) by Philox4x32-10 (cpu/philox.hpp), sigma the hardware
// profile's block_time_spread: the standard deviation of log tau, about the relative spread
// of the blocks' run times. A block started at time t0 loads K_j and V_j at t0 + j tau_b and
// stores O and L at t0 + Tc tau_b, and the next block in grid order takes its slot at that
// moment; accesses at the same moment go in the lockstep order (stores, then Q loads, then K
// and V, each in block order), so sigma = 0 is the lockstep schedule, access for access.
// Within a wave the blocks' positions spread as sigma x the steps taken; across waves a
// slot's start time wanders as the sum of its blocks' times (sigma Tc sqrt(waves)). A block
// that trails the leaders of its KV head by more than a partition's worth of tiles finds
// them evicted and reads them from DRAM again; that is what lockstep cannot produce. Every
// block is its own L2 access (no grouping): N = 131072 at 16 heads takes seconds.
// older_first: blocks take slots as in drift, and on each SM the block that started first
// (the lower block id among those that started together) runs at 1 + lead / 2 of its pace,
// the others at 1 - lead / 2, lead the profile's older_block_lead; each block's pace is set
// again whenever a block starts or ends on its SM. The H200 ran fa2 so (docs/IO-LEVELS.md,
// "The blocks logged"): the first half of a first wave 5% ahead of the second, and the two
// blocks of each SM drifting apart wave after wave until each is the older half of the time,
// which is what reads K and V again past the crossover.
// logged: each block on the SM and between the start and end that a GPU logged for it
// (block_log; bench/gpu/NOTES.md, "The scalar kernel at 16 heads", says how one is recorded),
// its K_j and V_j at start + j (end - start) / Tc, an even pace, or, where the log has them,
// at the times the block began each step (a step log: LoggedBlock::step_starts): the
// placement and timing of the later waves that lockstep and drift can only guess, replayed.
// Accesses at the same moment go in the drift schedule's order.
// catch_up: blocks take slots as in drift, with one draw of tau per KV head (every block of
// a head at its pace), and a step's time depends on where its tiles came from: tau where
// DRAM sent them, l2_step_share x tau where the L2 (or the SM's L1) held them (in
// proportion to the bytes where a step read some of each). A block that starts behind its
// head's others reads the tiles they brought in, runs faster, and closes the gap; once with
// them the lead passes from one to the next, and the head's blocks end together. The H200
// ran the scalar kernel so (docs/IO-LEVELS.md, "The scalar kernel: blocks that catch up"):
// a head's blocks that started up to 18% of their time apart ended within 60 us of each
// other, and blocks of the next head took the slots they freed, in step, two or three of them
// on one SM and sharing its L1.
//
// The L1 (l1_bytes > 0). Blocks run on SMs: R = sm_count x blocks_per_sm slots, slot k on SM
// k mod sm_count. The first wave takes slots 0, 1, ..., and a later block the slot freed
// first (blocks that end together free theirs in block order; drift, where one block ends
// at a time, gives the same). So a first wave puts block b on SM b mod sm_count and a partial
// wave spreads one block per SM before doubling up, as the hardware's block scheduler does;
// blocks that run together, end together and hand their SMs on together. Each
// SM has an LRU L1 of l1_bytes, whole tiles, read-only here: a block's K_j or V_j that its
// SM's L1 holds is served there and neither crosses into the SM nor reaches the L2; a miss
// goes to the L2 as above and is kept in the L1. So blocks of one KV head that share an SM
// and step together read each K and V tile into it once: the scalar kernel at one head, N =
// 16384 (256 blocks, 3 per SM) has 132 SMs reading for 256 blocks, 0.516 of the bytes the
// blocks load. (The L2 partition of a block stays b mod P, as above; the two agree where
// waves start whole.)
//
// The crossover (l2_crossover): a KV head whose blocks span two waves is re-read by the
// second; its tile j survives in the LRU when what was touched since its first read, itself
// included, fits. The wave's KV heads are h_w, the next wave's h_w+1, and the shared head is
// the last of one and the first of the other. Since tile j it has seen the shared head's K
// and V whole, the other heads' but for one tile each (at the first or the last step, the
// worst j), and one wave's O and L and the next's Q:
//
//     live(N) = 2 N d s  +  (h - 1) x 2 (N - Bc) d s  +  ceil(R / P) x (2 Br d s + 4 Br),
//     h = max(h_w, h_w+1) over the waves that share a KV head,
//
// and re-reads reach DRAM from the smallest N with live(N) > L2 / P. With P partitions it is
// taken per partition: each holds the K and V of the heads its own blocks read (h counted
// over them) and its own blocks' Q, O and L (ceil(R / P) where blocks alternate; where the
// next wave is the grid's last and short of R blocks, its Q tiles as they are), and since a
// partition that loses a tile takes it back from another that still holds it, a shared head's
// tile reaches DRAM again only once every partition that holds it has lost it: live(N) is the
// least over those partitions (the most over the pairs of waves). h is 1, or 2
// where a wave straddles two heads, once Tr >= R; more where a wave holds several heads. fa2 at d =
// 128 (Br 128, Bc 64, bf16) on the H200 (60 MiB, R = 264): as one pool (P = 1), 16 heads have h = 3
// from N = 29,696 (Tr = 232 < R), h = 2 from N = 44,480, and from N = 88,832 one head's K and V
// alone do not fit, so every wave re-reads; in two partitions of 30 MiB (P = 2, the profile's), 16
// heads re-read from N = 7,488 (h = 6) and one head from N = 49,088 with blocks alternating,
// from 8,960 (h = 5) and 49,664 with the placement measured on the H200
// (tests/simulator/test_grid_l2.cpp runs the grid at these N).
//
// The backward's grids (GridProblem::pass; the kernels as backward_kernel_program.cpp counts
// them). Everything above holds, with the blocks' moves of each pass:
//
//   pass             a block owns         at its start    a step             at its end
//   forward          query tile i (head)  Q_i             K_j, V_j           O_i, L_i
//   backward_main    KV tile j (KV head)  K_j, V_j        Q_i, dO_i, L_i,    dK_j, dV_j
//                                                         D_i; dQ_i reduced
//   backward_main_   the same             K_j, V_j        Q_i, dO_i, L_i,    dK_j, dV_j
//     deterministic                                       D_i
//   backward_dq      query tile i (head)  Q_i, dO_i,      K_j, V_j           dQ_i
//                                         L_i, D_i
//   backward_pre     rows r of all heads  O_r, dO_r       (none)             D_r, zeros
//                                                                            into dQ acc._r
//   backward_pre_    the same             O_r, dO_r       (none)             D_r
//     deterministic
//   backward_post    the same             dQ acc._r       (none)             dQ_r
//
// The main kernel's block b = kv_head x Tc + j (its blockIdx.x is the KV tile, in order: under
// the causal mask tile 0, which the most queries see, first). Its steps go through the query
// heads of its GQA group one after the other, and for each through the query tiles that see
// tile j, from the first, floor(j Bc / Br) under the top-left mask with N_q = N (the tile of
// the first row that sees key j Bc: row j Bc - (N - N_q) bottom-right; 0 without the mask),
// to Tr - 1: step s is
// query tile first + s mod count of the group's query head floor(s / count), count = Tr -
// first. So under the mask the blocks of a wave that start together walk the same query
// tiles of their first query head 2 steps apart at Bc = 2 Br (block j + 1 reads tile i two
// steps before block j), those of the group's h-th head 2 (h + 1) steps apart (each block's
// count is 2 shorter than the one before it). Blocks of later waves start as earlier ones
// end, each at its own step: the grid runs them as they come. A block whose keys no query
// sees (top-left with N_q < N) takes no step; it loads K_j and V_j first (v2) or nothing
// (v3: GridProblem::skips_unseen_kv), and stores its zeros.
// The reduction of dS K_j into dQ_i (the atomic mode's red.global.add into the fp32 dQ
// accumulator) is done in the L2: the tile's lines are read from DRAM if the L2 lacks them,
// then held dirty. All of a tile's reductions meet in one partition, the home of its first line
// (l2_line_home), where the L2 keeps the one copy that every SM adds to: a line of the
// accumulator never sits dirty in two partitions. Into the SMs a reduction brings nothing; it
// is booked as the bytes it writes. The deterministic mode's dQ kernel runs the forward's grid
// (its last query tile first under the mask) with the dQ kernel's own tiles and its moves. The
// pre- and post-kernels take the (batch, head, row) rows of every head as one array, a block
// per Br of them in order (a warp a row), and take no steps: a block reads its rows and writes
// its results. The backward's loads bypass the L1 (cp.async.cg, TMA) and no kernel of it has
// a scheduler of its own: l1_bytes is 0 and order is empty there. The crossover's closed form
// is the forward's.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/l2_policy.hpp"
#include "flashlab/sim/machine.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace flashlab::sim {

// DRAM moves whole sectors (kSectorBytes, warp_store.hpp, which machine.hpp brings); an L2
// line is four of them.

// Which tile of a full L2 partition makes room (above): the least recently used (lru, the
// default, what the lessons teach and the closed forms assume), any resident tile, each as
// likely, drawn from Philox4x32-10 keyed by the problem's seed (random), or 128-byte lines in
// hashed sets, LRU within each (sets): L2Replacement, flashlab/sim/l2_policy.hpp.

// Which kernel's grid, and so which tiles its blocks move (above, "The backward's grids").
enum class GridPass {
  forward,                      // FlashAttention-2's forward (and fa3's, with its order)
  backward_main,                // the backward's main kernel, dQ reduced into the accumulator
  backward_main_deterministic,  // the same without the reductions (the deterministic mode)
  backward_dq,                  // the deterministic mode's dQ kernel
  backward_pre,                 // the pre-kernel: D, and the dQ accumulator set to 0
  backward_pre_deterministic,   // the pre-kernel of the deterministic mode: D alone
  backward_post,                // the post-kernel: dQ from the accumulator
};
std::string_view to_string(GridPass pass);

// How the resident blocks advance through their KV tiles (above).
enum class GridSchedule {
  lockstep,  // together, one KV step at a time
  drift,     // each block at its own pace, drawn from block_time_spread and seed
  // each SM's oldest block faster than its others by older_block_lead (drift's draws on top)
  older_first,
  logged,    // each block where and when a GPU ran it (block_log)
  // a pace drawn per KV head, and a step whose tiles the L2 (or the L1) held faster
  // (l2_step_share), so that a block behind its head's others catches up with them
  catch_up,
};

// One block as a GPU ran it: the SM and its start and end, in any unit of time that all the
// blocks share (the scalar kernel's logs: ns of %globaltimer).
struct LoggedBlock {
  cpu::Index sm = 0;
  double start = 0, end = 0;
  // When it began each of its steps, in order, from start to end (a step log); empty: its
  // steps at an even pace between start and end.
  std::vector<double> step_starts{};
};
std::string_view to_string(GridSchedule schedule);

// The work of one block of the grid: a query tile of one head.
struct BlockTile {
  cpu::Index head = 0, tile = 0;
};

struct GridProblem {
  GridPass pass = GridPass::forward;
  cpu::Index N = 1024;  // keys per head, and queries unless N_q is given
  cpu::Index N_q = 0;   // queries per head where they differ from the keys; 0: N
  cpu::Index d = 128;   // head dimension
  DType dtype = DType::bf16;
  cpu::Index heads = 1;  // query heads times batch: the grid's y and z
  // 0: as many as heads; else heads / kv_heads query heads share each KV head (GQA, MQA).
  cpu::Index kv_heads = 0;
  // The mask and its alignment: query i sees key j when j <= i + diagonal_offset() (N - N_q
  // bottom-right, 0 top-left; the same where N_q = N).
  cpu::Causal causal = cpu::Causal::none;
  // Under the mask, which query tile block x of a head runs in grid order: Tr - 1 - x, the
  // longest first (FlashAttention-2's, the default), or x (the scalar kernel's).
  bool causal_longest_first = true;
  cpu::Index Br = 128, Bc = 64;            // the kernel's tiles
  // The backward's main kernel as built where its KV tile no query sees (top-left with N_q <
  // N: keys past the last query): true, it loads nothing and writes its zeros (v3's,
  // BackwardKernelFacts::skips_unseen_kv); false, it loads K_j and V_j first (v2's).
  bool skips_unseen_kv = false;
  cpu::Index blocks_per_sm = 2;            // the kernel's occupancy
  cpu::Index sm_count = 132;
  Bytes l2_bytes = 60 * 1024 * 1024;  // all partitions together
  cpu::Index l2_partitions = 1;       // the hardware profile's l2_partitions
  L2Replacement replacement = L2Replacement::lru;  // the hardware profile's l2_replacement
  int l2_ways = kL2Ways;  // sets: the lines of a set, the hardware profile's l2_ways
  // Home copies (the hardware profile's l2_home_copies; sets only): reads go line by line,
  // and a line read from DRAM, or written, is held at its home partition too (the header,
  // "Home copies").
  bool l2_home_copies = false;
  // The most bytes each partition holds dirty (the hardware profile's l2_dirty_cap): past it
  // a partition writes its oldest dirty lines back, keeping them, clean. 0: no cap.
  // 0 <= l2_dirty_cap <= partition_bytes().
  Bytes l2_dirty_cap = 0;
  // Reduced lines kept among a set's l2_reduced_window least recently used (sets only; the
  // rule: l2_policy.hpp's check_l2_reduced_window). 1: plain LRU, every profile's.
  // 1 <= l2_reduced_window <= l2_ways.
  int l2_reduced_window = 1;
  GridSchedule schedule = GridSchedule::lockstep;
  // drift, older_first and catch_up: sigma, the standard deviation of log(a block's time per
  // KV tile; under catch_up a KV head's); the hardware profile's block_time_spread. 0 <= sigma
  // <= kMaxBlockTimeSpread.
  double block_time_spread = 0;
  // older_first only: how much faster the oldest block on an SM runs than the others there,
  // as a share of a block's pace (paces 1 + lead / 2 and 1 - lead / 2); the hardware
  // profile's older_block_lead. 0 <= lead < 1.
  double older_block_lead = 0;
  // catch_up only: a step's time where the L2 or the SM's L1 served its tiles, as a share
  // of one whose tiles came from DRAM (a step that read some of each: in proportion to the
  // bytes). 0 < l2_step_share <= 1.
  double l2_step_share = 1;
  // The Philox key of the drift schedule's block times and of random replacement's victims.
  std::uint64_t seed = 0;
  // logged only: one entry per block of the grid, in block order, each SM below sm_count and
  // 0 <= start <= end. The L1 (l1_bytes) is the logged SM's; the L2 partition stays the
  // block's (partition_of).
  std::vector<LoggedBlock> block_log{};
  // logged only: the L2 partition each SM reads through, one entry an SM (bench_l2_partitions'
  // verdict for each SM of the GPU that logged the blocks), so that a logged block reads
  // through its SM's partition. Empty: the block's partition_of.
  std::vector<cpu::Index> sm_partitions{};
  // Which (head, query tile) block b runs. Empty: grid order, a head's query tiles one after
  // the other (FlashAttention-2's grid; under the causal mask the last tile first). Else the
  // kernel's own order (fa3's tile scheduler, flashlab/gpu/tile_schedule.hpp, handed in by
  // the caller), a one-to-one map of 0 .. blocks() - 1 onto the heads' tiles.
  std::function<BlockTile(cpu::Index block)> order{};
  // The L1 of each SM that K and V tiles pass through, for a kernel whose K and V loads are
  // cached there (the scalar kernel built with plain loads, bench_scalar_block_log); 0 where
  // they bypass it (cp.async.cg, ld.global.cg, TMA: every kernel of the library), the default.
  // See "The L1" above.
  Bytes l1_bytes = 0;
  // Which L2 partition the SM of each slot reads through: empty for b mod P, the header's
  // placement; else one entry a slot, each below l2_partitions, for sm_count slots (block b
  // in slot b mod sm_count: scattered_partitions() below) or for the R = sm_count x
  // blocks_per_sm slots of a whole first wave (block b in slot b mod R: the placement
  // measured on a GPU, measured_slot_partitions() in profiles.hpp). docs/IO-LEVELS.md, "Where
  // blocks land", says what the H200's block scheduler does.
  std::vector<cpu::Index> slot_partitions{};

  cpu::Index kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
  cpu::Index queries() const { return N_q > 0 ? N_q : N; }
  cpu::Index diagonal_offset() const { return cpu::Mask{causal, queries(), N}.diagonal_offset(); }
  cpu::Index query_tiles() const { return cpu::tile_count(queries(), Br); }  // Tr
  cpu::Index kv_tiles() const { return cpu::tile_count(N, Bc); }     // Tc
  // A block per (head, query tile), per (KV head, KV tile) for the backward's main kernel, per
  // Br rows of all heads' for its pre- and post-kernels.
  cpu::Index blocks() const {
    if (streams_rows()) return cpu::tile_count(heads * queries(), Br);
    return owns_kv_tiles() ? kv_head_count() * kv_tiles() : heads * query_tiles();
  }
  // Whether a block owns Br rows of the (head, row) array and takes no step (the backward's
  // pre- and post-kernels).
  bool streams_rows() const {
    return pass == GridPass::backward_pre || pass == GridPass::backward_pre_deterministic ||
           pass == GridPass::backward_post;
  }
  // Whether a block owns a KV tile (the backward's main kernel) rather than a query tile.
  bool owns_kv_tiles() const {
    return pass == GridPass::backward_main || pass == GridPass::backward_main_deterministic;
  }
  // R: the blocks resident at once.
  cpu::Index resident_blocks() const;
  Bytes partition_bytes() const { return l2_bytes / l2_partitions; }
  // The partition of the SM that runs block b: b mod P (the header says why), or where
  // slot_partitions is given, that of its slot, b mod the map's length.
  cpu::Index partition_of(cpu::Index block) const {
    if (slot_partitions.empty()) return block % l2_partitions;
    const auto slots = static_cast<cpu::Index>(slot_partitions.size());
    return slot_partitions[static_cast<std::size_t>(block % slots)];
  }
  // The SM of one of the R slots resident blocks take (the header, "The L1").
  cpu::Index sm_of_slot(cpu::Index slot) const { return slot % sm_count; }
};

// A balanced map of sm_count SM slots onto P partitions (each partition takes sm_count / P
// slots, the first sm_count mod P one more), in an order shuffled by draws of Philox4x32-10
// keyed by `seed`: a placement that is neither alternating nor the GPU's own, to put beside
// measurements. 1 <= partitions <= sm_count.
std::vector<cpu::Index> scattered_partitions(cpu::Index sm_count, cpu::Index partitions,
                                             std::uint64_t seed);

// The largest block_time_spread the drift schedule takes: sigma = 1 already lets one block
// in six take 2.7 times the median's time per tile.
inline constexpr double kMaxBlockTimeSpread = 1.0;

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, unless the
// pass is one of GridPass's (and, for the backward's, l1_bytes is 0 and order empty),
// 1 <= N <= 2^22, 0 <= N_q <= 2^22, 1 <= d <= 2^12, 1 <= heads <= 2^16, kv_heads divides heads, the
// tiles, blocks per SM and SMs are >= 1, the L2 is 1 byte to 1 PiB, 1 <= l2_partitions <= 64, 0 <=
// l2_dirty_cap <= partition_bytes(), slot_partitions is empty or one partition below l2_partitions
// for each of the sm_count (or sm_count x blocks_per_sm) slots, causal is one of cpu::Causal's, and
// block_time_spread is 0 to kMaxBlockTimeSpread (0 with the lockstep schedule), and
// 0 < l2_step_share <= 1 (1 unless the schedule is catch_up).
void check(const GridProblem& problem);

// A block's time per KV tile under the drift schedule, exp(sigma z_b) (above), for a problem
// that check() accepts; 1 when sigma = 0. Under catch_up every block of KV head h takes the
// draw of block h (its time where DRAM sends its tiles).
double block_tile_time(const GridProblem& problem, cpu::Index block);

// One thing the L2 did, in the order it did it.
enum class L2EventKind {
  hit,         // a read or write of a resident tile
  miss,        // a read of a tile not resident: fetched from DRAM
  allocate,    // a write of a tile not resident: placed without a fetch, dirty
  evict,       // a clean tile dropped to make room
  write_back,  // a dirty tile written to DRAM to make room
  clean,       // a dirty tile written to DRAM past the dirty cap, kept resident and clean
  bypass,      // a tile larger than the whole L2: straight to or from DRAM
  copy,        // a read of a tile not in the reader's partition but in another: copied
               // across, no DRAM traffic
};
std::string_view to_string(L2EventKind kind);

struct L2Event {
  L2EventKind kind;
  int tensor;         // index into the report's tensors (forward: Q, K, V, O, L)
  cpu::Index row0;    // the tile's first row in its tensor (heads stacked: head h at h N)
  Bytes bytes;        // sectors the tile occupies, in bytes
  bool write;         // for hit, miss, allocate, bypass: the access was a store
  int partition = 0;  // the L2 partition it happened in
};
using L2Observer = std::function<void(const L2Event&)>;

struct GridReport {
  GridProblem problem{};
  // The pass's tensors, heads stacked: forward Q, K, V, O, L; backward_main Q, K, V, dO, L,
  // D, dQ accumulator, dK, dV (the deterministic mode's without the accumulator); backward_dq
  // Q, K, V, dO, L, D, dQ; backward_pre O, dO, D, dQ accumulator (the deterministic mode's
  // without it); backward_post dQ accumulator, dQ (the names of the backward mirror's
  // tensors). read and written:
  // bytes crossing into and out of the SMs (every block's tiles; a reduction's are written);
  // dram_read and dram_written: what reached DRAM while the kernel ran (misses, and
  // write-backs of evicted dirty tiles).
  std::vector<TensorTraffic> tensors{};
  std::vector<Bytes> dirty_at_end{};  // per tensor: left dirty in the L2 when the grid ends
  cpu::Index resident_blocks = 0;     // R
  std::int64_t steps = 0;             // KV steps of the whole grid (resident blocks together;
                                      // drift: the grid's time, in tile times, rounded up;
                                      // logged: the last end, in the log's unit, rounded up)
  std::int64_t l2_accesses = 0;       // tile accesses the L2 saw (blocks that step together
                                      // on the same tile: one access, the rest booked as hits)
  // Loads of K and V tiles that the SMs' L1s served (l1_bytes > 0), in bytes: what the
  // blocks loaded less what crossed into the SMs.
  Bytes l1_hit_bytes = 0;

  Bytes sm_read() const;
  Bytes sm_written() const;
  Bytes dram_read() const;
  Bytes dram_written() const;  // during the kernel: what its DRAM write counter sees
  Bytes left_dirty() const;    // written to DRAM only after the kernel ends
  const TensorTraffic& tensor(std::string_view name) const;
};

// Runs the grid through the shared L2 on the problem's schedule. With an observer, every
// block's every access is its own L2 access and each event is reported; without one, the
// lockstep schedule books blocks of the same head that started together and run alike as one
// group (the same counts, faster: N = 262144 at 16 heads in well under a second). The drift
// schedule goes block by block either way; with the same seed it gives the same bytes.
GridReport run_grid(const GridProblem& problem, const L2Observer& observer = {});

// The closed form above: h(N), the most KV heads of two waves that share one (0 when no KV
// head's blocks span two waves: nothing is re-read from one wave to the next), and live(N)
// in bytes (0 with h = 0).
cpu::Index reread_heads(const GridProblem& problem);
Bytes live_bytes(const GridProblem& problem);

// h(N) is not monotone in N: where R blocks span three heads (Tr a little below R) live(N)
// can pass the L2 and fall back below it at a larger N, where they span two; and at sizes
// where the waves line up with the heads (Tr a multiple of R, or R of Tr) fewer heads are
// live. So two answers: where re-reads first reach DRAM, and the N from which K and V of a
// single head outgrow the L2, past which every wave re-reads whatever KV head it shares
// with the next, whatever the alignment.
struct L2Crossover {
  cpu::Index first_N = 0;     // the smallest N (a multiple of Bc) with live(N) > L2 / P
  cpu::Index heads_live = 0;  // h(N) at first_N
  Bytes live = 0;             // live(N) at first_N
  // The smallest multiple of Bc with live(N) > L2 / P at h = 1 between full waves, and not
  // below first_N (one head alone, whose second wave is short, re-reads a little later).
  cpu::Index one_head_N = 0;
};
// problem.N is ignored; N ranges over multiples of Bc up to 2^22, queries and keys alike.
// Empty when live(N) stays within the L2 there. The closed form is the non-causal forward
// grid's: a causal problem, one of N_q != N, or a backward pass, is refused
// (cpu::InvalidArgument). reread_heads and live_bytes take N_q != N (N keys, N_q queries).
std::optional<L2Crossover> l2_crossover(const GridProblem& problem);

}  // namespace flashlab::sim

// What each kernel of the ladder is, written once: its tiles, threads, shared memory, where
// its intermediates live and in which precision, and which head dimensions and dtypes it
// takes. The kernels take their constants from here (gpu/kernels/NN_*.cu), validation builds
// its messages from here, flashlab_kernel_info() answers from here, and the simulator's
// mirrors of the kernels are configured from here by their caller. Plain C++17 and
// flashlab.h: it builds without CUDA.
#pragma once

#include "flashlab/fa3.h"
#include "flashlab/flashlab.h"
#include "flashlab/gpu/host_device.hpp"
#include "flashlab/gpu/swizzle.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace flashlab::gpu {

inline constexpr int kWarpSize = 32;

// N_q, N_k and d are indexed with int inside the kernels; half of INT32_MAX leaves room for
// row + causal_offset + 1, where causal_offset = N_k - N_q may be as large as N_k.
inline constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max() / 2;

constexpr int64_t dtype_bytes(flashlab_dtype dtype) { return dtype == FLASHLAB_FP32 ? 4 : 2; }

constexpr std::string_view dtype_name(flashlab_dtype dtype) {
  switch (dtype) {
    case FLASHLAB_FP32: return "fp32";
    case FLASHLAB_FP16: return "fp16";
    case FLASHLAB_BF16: return "bf16";
  }
  return "unknown";
}

inline constexpr std::array kDtypes = {FLASHLAB_FP32, FLASHLAB_FP16, FLASHLAB_BF16};

// The head dimensions a kernel takes: the listed values, or (count == 0) any d in [1, max].
struct HeadDims {
  std::array<int64_t, FLASHLAB_MAX_HEAD_DIMS> values{};
  int count = 0;
  int64_t max = kMaxIndex;  // used only when count == 0

  constexpr bool contains(int64_t d) const {
    if (count == 0) return d >= 1 && d <= max;
    for (int i = 0; i < count; ++i)
      if (values[i] == d) return true;
    return false;
  }
  constexpr int64_t largest() const {
    int64_t out = count == 0 ? max : 0;
    for (int i = 0; i < count; ++i) out = values[i] > out ? values[i] : out;
    return out;
  }
};

// A set of dtypes: bit (1 << dtype) for each one in it, as in flashlab_kernel_info_t.
struct DtypeSet {
  uint32_t bits = 0;
  constexpr bool contains(int32_t dtype) const {
    return dtype >= 0 && dtype < 32 && (bits >> dtype & 1u) != 0;
  }
};
constexpr uint32_t dtype_bit(flashlab_dtype dtype) { return 1u << dtype; }

// The facts of a kernel that hold for every problem it takes.
struct KernelRecord {
  flashlab_kernel id;
  std::string_view name;     // "naive", "scalar", "fa2": what the CLI and the tests call it
  std::string_view summary;  // one line
  HeadDims head_dims;
  DtypeSet dtypes;
  bool dropout = false;      // applies dropout on the weights (p > 0); the others refuse it
};

// Where an intermediate lives and in which precision.
struct Intermediate {
  flashlab_memory level = FLASHLAB_MEMORY_NONE;
  flashlab_dtype dtype = FLASHLAB_FP32;
};

// One warp-level store instruction of a kernel, as its source writes it: `threads` active
// lanes store `bytes_per_thread` bytes each, and their bytes fall in `runs` runs of
// contiguous bytes (a run per row the lanes write, or one run for consecutive addresses),
// each starting on a 32-byte sector. The L1 sends every sector a run touches to the L2 in
// full, so this, not the bytes of data, sets the bytes out of the SMs (the simulator's
// sim::WarpStore and sim::bytes_out; docs/IO-LEVELS.md). All zero: not described (a
// library's kernel).
struct WarpStorePattern {
  int bytes_per_thread = 0;
  int threads = 0;
  int runs = 0;
};
// The unit the L1 sends stores to the L2 in (and the simulator's sim::kSectorBytes, which a
// test checks against this).
inline constexpr int kSectorBytes = 32;
// fp32 values a sector holds: a kernel that writes one float per row stores this many
// consecutive rows together (one warp, one instruction), so each sector is written whole by
// one store (the backward's D, the decode's LSE: docs/IO-LEVELS.md, "One float a row").
inline constexpr int kFloatsPerSector = kSectorBytes / int(sizeof(float));
// A lane per row, each storing one element: 32 runs of one element, a sector each.
constexpr WarpStorePattern lane_per_row(int64_t element_bytes) {
  return {int(element_bytes), kWarpSize, kWarpSize};
}
// The m16n8 accumulator fragment stored straight from registers (mma.sync and wgmma lay
// it out alike): lane (g, t) = (lane / 4, lane % 4) holds columns 2t, 2t + 1 of rows g and
// g + 8 of each n8 tile, stored as one 32-bit pair of 16-bit elements per row: an
// instruction writes 8 rows x 16 bytes, 8 sectors for 128 bytes.
inline constexpr WarpStorePattern kFragmentPairStore{4, kWarpSize, 8};
// L (fp32) of the same fragment: lane t = 0 of each quad stores its row's float, 8
// consecutive rows: one sector of 32 bytes.
inline constexpr WarpStorePattern kFragmentLseStore{4, kWarpSize / 4, 1};
// A whole warp storing consecutive elements, lane by lane (a row of a row-per-warp kernel).
constexpr WarpStorePattern lanes_in_a_row(int64_t element_bytes) {
  return {int(element_bytes), kWarpSize, 1};
}
// Whole rows of a tile staged in SRAM, a 16-byte chunk a lane (sram_tiles.cuh's store_rows):
// an instruction writes 512 bytes as 512 / row_bytes full rows, every sector whole.
constexpr WarpStorePattern staged_row_store(int64_t d, flashlab_dtype dtype) {
  constexpr int kLaneBytes = swizzle::kChunkBytes;
  return {kLaneBytes, kWarpSize, int(kLaneBytes * kWarpSize / (d * dtype_bytes(dtype)))};
}
// One lane storing one 4-byte float (a row's L by thread 0 of a row's block: the naive softmax).
inline constexpr WarpStorePattern kOneFloatStore{4, 1, 1};
// One float for each of a block's `rows` consecutive rows, in one instruction
// (kernels/common.cuh's store_block_rows): one run, a whole sector at kFloatsPerSector rows.
constexpr WarpStorePattern block_rows_store(int rows) { return {int(sizeof(float)), rows, 1}; }

// One kernel's launch configuration and data flow for one (d, dtype).
struct KernelConfig {
  int Br = 0;               // query rows per block; 0 where the kernel has no tiles
  int Bc = 0;               // keys per K/V tile; 0 where the kernel has no tiles
  int threads = 0;          // threads per block (naive: of its softmax kernel)
  int64_t sram_bytes = 0;   // shared memory per block
  int blocks_per_sm = 0;    // the occupancy it is built for; 0 where it asks for none
  Intermediate s;           // the scores S = Q K^T * scale
  Intermediate w;           // P (naive) or W = exp(S - m') as fed to the product with V
  int kv_passes = 0;        // how many times each query tile streams all of K and V
  int s_hbm_reads = 0;      // how many times S is read back from HBM (0: never stored there)
  int pointer_align_bytes = 0;    // of Q, K, V and O
  int stride_align_elements = 0;  // of every batch, head and row stride that is used
  WarpStorePattern o_store;       // the epilogue's store of O
  WarpStorePattern lse_store;     // and of L = m + log l (fp32)
  // K and V come in by loads that the block waits for (the scalar kernel's), not by copies
  // issued steps ahead (cp.async, TMA), so a step whose tiles the L2 holds is faster than one
  // whose tiles come from DRAM (sim::GridProblem::l2_step_share). No kernel's loads of K and
  // V stop in the L1: every tile a block needs crosses into its SM.
  bool kv_loads_wait = false;
  // Under the causal mask, block x of a head runs query tile Tr - 1 - x, the longest first
  // (sim::GridProblem::causal_longest_first); false where it runs tile x.
  bool causal_longest_first = false;
};

// 01_naive.cu: three operators, S and P in HBM.
namespace naive {
inline constexpr int kSoftmaxThreads = 256;
// The softmax reads each row of S three times: its max, its sum, and to write P; each pass
// crosses into the SM (ld.global.cg: the L1 keeps none of S).
inline constexpr int kSoftmaxPasses = 3;
constexpr KernelConfig config(flashlab_dtype dtype) {
  KernelConfig c;
  c.threads = kSoftmaxThreads;
  c.sram_bytes = int64_t(sizeof(float)) * (kSoftmaxThreads / kWarpSize);  // warp partials
  c.s = {FLASHLAB_MEMORY_HBM, FLASHLAB_FP32};
  c.w = {FLASHLAB_MEMORY_HBM, dtype};
  c.kv_passes = 1;
  c.s_hbm_reads = kSoftmaxPasses;
  c.pointer_align_bytes = int(dtype_bytes(dtype));
  c.stride_align_elements = 1;
  c.lse_store = kOneFloatStore;  // softmax_rows: thread 0 of the row's block (O: cuBLAS's)
  return c;
}
}  // namespace naive

// 02_tiled_scalar.cu: one thread per query row, fp32 tiles in SRAM.
namespace scalar {
inline constexpr int kBr = 64;  // query rows per block = threads per block
inline constexpr int kBc = 32;  // keys per K/V tile
// sQ and sS rows are padded by one float against shared-memory bank conflicts.
inline constexpr int kRowPad = 1;
// Under the causal mask block x runs query tile x: the plain grid order, shortest first.
inline constexpr bool kCausalLongestFirst = false;
// sQ (Br, d + pad), sK and sV (Bc, d), sS (Br, Bc + pad), all fp32.
constexpr int64_t sram_bytes(int64_t d) {
  return int64_t(sizeof(float)) * (kBr * (d + kRowPad) + 2 * kBc * d + kBr * (kBc + kRowPad));
}
constexpr KernelConfig config(int64_t d, flashlab_dtype dtype) {
  KernelConfig c;
  c.Br = kBr;
  c.Bc = kBc;
  c.threads = kBr;
  c.sram_bytes = sram_bytes(d);
  c.s = {FLASHLAB_MEMORY_SRAM, FLASHLAB_FP32};
  c.w = {FLASHLAB_MEMORY_SRAM, FLASHLAB_FP32};
  c.kv_passes = 1;
  c.pointer_align_bytes = int(dtype_bytes(dtype));
  c.stride_align_elements = 1;
  // finalize: each thread writes its own row of O one element at a time (32 sectors per
  // instruction: 16x the data in bf16), and its row's L beside its neighbours' (exact).
  c.o_store = lane_per_row(dtype_bytes(dtype));
  c.lse_store = lanes_in_a_row(sizeof(float));
  c.kv_loads_wait = true;  // load_tile: ld.global.cg, converted to fp32 on the way to SRAM
  c.causal_longest_first = kCausalLongestFirst;
  return c;
}
}  // namespace scalar

// 03_fa2.cu: tensor cores, cp.async double buffering, 4 warps x 32 query rows.
namespace fa2 {
inline constexpr int kThreads = 4 * kWarpSize;
inline constexpr int kBr = 128;
inline constexpr int kBlocksPerSm = 2;  // 2 x 128 threads x <= 256 registers fill an SM
inline constexpr int kBuffers = 2;      // K and V tiles double-buffered
inline constexpr int kAlignBytes = 16;  // every load is a 16-byte cp.async
// Causal query tiles differ in work; the longest (last) ones are scheduled first.
inline constexpr bool kCausalLongestFirst = true;
// Measured on the H200 (bench/gpu/NOTES.md): with d = 64 a 128-key tile fits the registers
// and beats 64 (270 against 250 TFLOP/s); with d = 128, 64 beats 32.
constexpr int bc(int64_t d) { return d == 64 ? 128 : 64; }
// sQ (Br, d), sK and sV (kBuffers, Bc, d), in the input dtype.
constexpr int64_t sram_bytes(int64_t d, flashlab_dtype dtype) {
  return dtype_bytes(dtype) * (kBr * d + kBuffers * 2 * bc(d) * d);
}
constexpr KernelConfig config(int64_t d, flashlab_dtype dtype) {
  KernelConfig c;
  c.Br = kBr;
  c.Bc = bc(d);
  c.threads = kThreads;
  c.sram_bytes = sram_bytes(d, dtype);
  c.blocks_per_sm = kBlocksPerSm;
  c.s = {FLASHLAB_MEMORY_REGISTERS, FLASHLAB_FP32};
  c.w = {FLASHLAB_MEMORY_REGISTERS, dtype};  // rounded to the input dtype for mma.sync
  c.kv_passes = 1;
  c.pointer_align_bytes = kAlignBytes;
  c.stride_align_elements = int(kAlignBytes / dtype_bytes(dtype));
  c.o_store = staged_row_store(d, dtype);  // finalize: O through sQ, whole rows
  c.lse_store = kFragmentLseStore;
  c.causal_longest_first = kCausalLongestFirst;
  return c;
}
}  // namespace fa2

// 04_fa2_backward.cu and its helpers: FlashAttention-2's backward on tensor cores. Three
// kernels in the default mode, four in the deterministic one:
//   preprocess (04_backward_preprocess.cu): D = rowsum(dO o O) in fp32; zeroes the dQ
//     accumulator;
//   main (04_fa2_backward.cu): a block owns Bc keys of one (batch, KV head), loops over the
//     query heads of its GQA group and over their query tiles of Br rows, keeps dK and dV
//     in registers and adds dQ's share into the fp32 accumulator with 16-byte atomic
//     reductions (red.global.add.v4.f32); with dropout it draws the forward's mask again;
//   convert (04_backward_preprocess.cu): dQ = accumulator * scale, in the input dtype;
//   deterministic mode: no accumulator; a dQ kernel (04_fa2_backward_dq.cu) where a block
//     owns Br query rows and loops over the KV tiles in order, so dQ is summed in one fixed
//     order and written once.
namespace fa2_backward {
// Main kernel: 8 warps, each owns Bc / 8 = 16 keys; for dQ += dS K the 8 warps split the
// step's (Br, d) as 4 m16 row tiles x 2 halves of d.
inline constexpr int kThreads = 8 * kWarpSize;
inline constexpr int kBr = 64;                  // query rows per step
inline constexpr int kBc = 128;                 // keys per block
inline constexpr int kBlocksPerSm = 1;          // 256 threads x <= 255 registers fill the file
// dQ kernel (deterministic mode): 4 warps of 16 query rows; KV tiles of kDqBc keys.
inline constexpr int kDqThreads = 4 * kWarpSize;
inline constexpr int kDqBr = 64;                // query rows per block
inline constexpr int kDqBc = 64;                // keys per tile
inline constexpr int kDqBlocksPerSm = 2;        // 2 x 128 threads x <= 255 registers
inline constexpr int kBuffers = 2;              // Q/dO (main) or K/V (dQ kernel) double-buffered
inline constexpr int kAlignBytes = 16;          // every tile load is a 16-byte cp.async
inline constexpr int kPreprocessThreads = 256;  // preprocess and convert: one warp per row
inline constexpr int kPreprocessRowsPerBlock = kPreprocessThreads / kWarpSize;  // 8 rows
static_assert(kPreprocessRowsPerBlock == kFloatsPerSector,
              "a block's D is one whole sector (kDStore)");
inline constexpr int64_t kWorkspaceAlignBytes = 256;  // of the workspace and of each part
inline constexpr HeadDims kHeadDims{{64, 128}, 2};
inline constexpr DtypeSet kDtypes{dtype_bit(FLASHLAB_FP16) | dtype_bit(FLASHLAB_BF16)};
// Their stores, as the sources write them:
//   main kernel, write_dk_dv: dK and dV staged in the warp's rows of sK and sV (after a block
//     barrier) and stored as whole rows (from the mma fragments, 8 rows x 16 bytes, 2x the
//     data, they left the SMs merged in part: 0.97 of the deterministic pass's sectors at
//     d = 64, docs/IO-LEVELS.md);
//   main kernel, add_dq_tile: red.global.add.v4.f32, lane pairs make a row's 32 bytes, 16
//     rows: 16 full sectors (exact);
//   preprocess: D of the block's 8 consecutive rows in one store by warp 0 (8 floats: one
//     whole sector; it was one float a row by lane 0 of each warp, a sector for 4 bytes, of
//     which 1 to 3% were merged before leaving the SMs) and the accumulator's zeros lane by
//     lane (exact);
//   convert: dQ lane by lane along the row (exact);
//   dQ kernel (deterministic mode): dQ staged in its rows of sQ and stored as whole rows, as
//     fa2's O (from the mma fragments, half of each sector an instruction, it left the SMs
//     merged in part: 0.85 of the pass's sectors on the H200, docs/IO-LEVELS.md).
constexpr WarpStorePattern dk_dv_store(int64_t d, flashlab_dtype dtype) {
  return staged_row_store(d, dtype);
}
constexpr WarpStorePattern dq_kernel_store(int64_t d, flashlab_dtype dtype) {
  return staged_row_store(d, dtype);
}
inline constexpr WarpStorePattern kDqReduction{16, kWarpSize, kWarpSize / 2};
inline constexpr WarpStorePattern kDStore = block_rows_store(kPreprocessRowsPerBlock);
inline constexpr WarpStorePattern kAccumulatorZeroStore = lanes_in_a_row(sizeof(float));
constexpr WarpStorePattern dq_store(flashlab_dtype dtype) {
  return lanes_in_a_row(dtype_bytes(dtype));
}

// Main kernel: sK, sV (Bc, d); sQ, sdO (kBuffers, Br, d); sdS (Bc, Br), all in the input
// dtype; sL, sD (kBuffers, Br) fp32; sKeep (threads) 32-bit words, dropout's mask bits.
constexpr int64_t sram_bytes(int64_t d, flashlab_dtype dtype) {
  return dtype_bytes(dtype) * (2 * kBc * d + 2 * kBuffers * kBr * d + kBc * kBr) +
         int64_t(sizeof(float)) * 2 * kBuffers * kBr + int64_t(sizeof(uint32_t)) * kThreads;
}
// dQ kernel (deterministic mode): sQ, sdO (Br, d); sK, sV (kBuffers, Bc, d), its own tiles.
constexpr int64_t dq_sram_bytes(int64_t d, flashlab_dtype dtype) {
  return dtype_bytes(dtype) * (2 * kDqBr * d + 2 * kBuffers * kDqBc * d);
}

constexpr KernelConfig config(int64_t d, flashlab_dtype dtype) {
  KernelConfig c;
  c.Br = kBr;
  c.Bc = kBc;
  c.threads = kThreads;
  c.sram_bytes = sram_bytes(d, dtype);
  c.blocks_per_sm = kBlocksPerSm;
  c.s = {FLASHLAB_MEMORY_REGISTERS, FLASHLAB_FP32};  // S^T, recomputed per step
  c.w = {FLASHLAB_MEMORY_REGISTERS, dtype};          // P^T = exp(S - L), rounded for mma
  c.kv_passes = 1;
  c.pointer_align_bytes = kAlignBytes;
  c.stride_align_elements = int(kAlignBytes / dtype_bytes(dtype));
  return c;
}
constexpr KernelConfig dq_config(int64_t d, flashlab_dtype dtype) {
  KernelConfig c = config(d, dtype);
  c.Br = kDqBr;
  c.Bc = kDqBc;
  c.threads = kDqThreads;
  c.blocks_per_sm = kDqBlocksPerSm;
  c.sram_bytes = dq_sram_bytes(d, dtype);
  return c;
}

// The workspace a call needs, in bytes: D (batch, heads_q, N_q) fp32, then, unless
// deterministic, the dQ accumulator (batch, heads_q, N_q, d) fp32, each part starting
// kWorkspaceAlignBytes-aligned:
//   round_up(4 B Hq N_q) + (deterministic ? 0 : 4 B Hq N_q d).
// The caller checks the products for overflow first (validation does).
constexpr int64_t round_up(int64_t bytes) {
  return (bytes + kWorkspaceAlignBytes - 1) / kWorkspaceAlignBytes * kWorkspaceAlignBytes;
}
constexpr int64_t d_offset_bytes() { return 0; }
constexpr int64_t dq_accum_offset_bytes(int64_t batch, int64_t heads_q, int64_t n_q) {
  return round_up(int64_t(sizeof(float)) * batch * heads_q * n_q);
}
constexpr int64_t workspace_bytes(int64_t batch, int64_t heads_q, int64_t n_q, int64_t d,
                                  bool deterministic) {
  const int64_t accum = deterministic ? 0 : int64_t(sizeof(float)) * batch * heads_q * n_q * d;
  return dq_accum_offset_bytes(batch, heads_q, n_q) + accum;
}
}  // namespace fa2_backward
// 05_decode_split_kv.cu and 05_decode_combine.cu: split-KV decode (flash-decoding) with
// GQA packing and a paged KV cache. Not a rung of the forward ladder (it has its own call,
// flashlab_decode in flashlab/decode.h), so it has no KernelRecord: these are its facts.
//
// One block of kThreads handles one (batch entry, KV head, row block, split). Its packed
// query rows are the N_q rows of every query head of the GQA group that reads this KV head,
// row p = (head in group) * N_q + i, at most kMaxRowsPerBlock of them: the 16 rows (M) of
// an mma.sync m16n8k16 tile; a group with more packed rows takes several row blocks (and
// reads K and V once per row block). Rows the group does not fill are zeros in the tile.
// K and V arrive in tiles of kBc keys through a ring of stages(d) SRAM buffers (cp.async,
// swizzled as sram_tiles.cuh); each warp takes its own kKeysPerWarp keys of every tile and
// keeps its own state (m, l, U) over them in registers: S = Q K^T and U += W V on the
// tensor cores. The warps' states are merged once, in SRAM, at the end of the split.
namespace decode {
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * kWarpSize;
inline constexpr int kAlignBytes = 16;       // every K and V load is a 16-byte cp.async
inline constexpr int kMaxRowsPerBlock = 16;  // packed query rows: mma.sync's M
inline constexpr int kKeysPerWarp = 16;      // a warp's keys of a tile: one k16 slice of W V
inline constexpr int kBc = kWarps * kKeysPerWarp;  // keys per tile, d = 64 and d = 128 alike
inline constexpr int kBlocksPerSm = 2;       // by SRAM: two rings of kRingBytes per SM
inline constexpr int kMaxQueryRows = 16;     // N_q: a new token, or up to 16 speculated ones
inline constexpr int kMaxSplits = 64;        // num_splits: 0 = automatic, 1..kMaxSplits forced
inline constexpr int kMinPageSize = 16;      // page_size: a power of two in [16, kMaxPageSize]
inline constexpr int kMaxPageSize = 1 << 16;
// The ring of K and V tiles: 96 KiB per block at d = 64 and d = 128 alike, so that while a
// block computes one tile, up to stages - 1 tiles (64 KiB at d = 128, 80 at d = 64) are in
// flight; at kBlocksPerSm blocks 128 KiB or more per SM, well above the ~36 KiB that Little's
// law asks of HBM (4.8 TB/s x ~1 us / 132 SMs), and two rings plus the runtime's 1 KiB a
// block fit the H200's 228 KiB.
inline constexpr int64_t kRingBytes = 96 * 1024;
constexpr int64_t tile_bytes(int64_t d) { return int64_t(kBc) * d * 2; }  // K or V, 16-bit
constexpr int64_t stage_bytes(int64_t d) { return 2 * tile_bytes(d); }    // K and V
constexpr int stages(int64_t d) { return int(kRingBytes / stage_bytes(d)); }  // 3 or 6
// Keys each thread copies per tile: its keys are consecutive, so they lie on one page
// (kMinPageSize is a multiple), and a thread reads one block-table entry per tile.
constexpr int chunks_per_row(int64_t d) { return int(d / 8); }  // 16-byte chunks of a key row
constexpr int keys_per_thread(int64_t d) { return kBc * chunks_per_row(d) / kThreads; }
static_assert(kMinPageSize % keys_per_thread(64) == 0 && kMinPageSize % keys_per_thread(128) == 0,
              "a thread's keys of a tile never straddle a page");
// Bytes of K and V one block has in flight while it computes a tile: stages - 1 tiles.
constexpr int64_t bytes_in_flight_per_block(int64_t d) {
  return (stages(d) - 1) * stage_bytes(d);
}
// The ring of K and V tiles: stages x (K, V) tiles.
constexpr int64_t ring_bytes(int64_t d) { return stages(d) * stage_bytes(d); }
// The warps' states at the merge, kWarps x `rows` packed rows x (U (d) + m + l), fp32 (33 KiB
// at d = 128 for all kMaxRowsPerBlock rows): the split kernel's reuse the ring, which is idle
// by then.
constexpr int64_t merge_bytes(int64_t d, int64_t rows = kMaxRowsPerBlock) {
  return int64_t(kWarps) * rows * (d + 2) * 4;
}
constexpr int64_t sram_bytes(int64_t d) {
  return ring_bytes(d) > merge_bytes(d) ? ring_bytes(d) : merge_bytes(d);
}
// The tile a sequence is cut into for the splits: split s takes tiles [s q, (s + 1) q) of
// its ceil(L / kBc) tiles, q = ceil(tiles / splits), so only the sequence's last tile is
// ragged; the splits past the last tile (when splits > tiles / q) have no keys and write
// the empty state (m = -inf, l = 0, U = 0).
constexpr int bc(int64_t /*d*/) { return kBc; }
// Split s's first tile by that rule (split_first_tile(T, S, S) = T, the end of the last).
FLASHLAB_HOST_DEVICE constexpr int split_first_tile(int64_t tiles, int64_t splits, int64_t split) {
  const int64_t q = (tiles + splits - 1) / splits;
  return int(split * q < tiles ? split * q : tiles);
}

// Row blocks per (batch entry, KV head): ceil(group_size * N_q / kMaxRowsPerBlock).
constexpr int64_t row_blocks(int64_t group_size, int64_t n_q) {
  return (group_size * n_q + kMaxRowsPerBlock - 1) / kMaxRowsPerBlock;
}

// The split heuristic: enough blocks for about one wave of resident blocks on every SM, and
// no split shorter than kMinKeysPerSplit keys, so that the combine (which reads and writes
// (d + 2) floats per split and row) stays small beside the split's K and V (d = 128, GQA 4
// rows: 2 KiB of state against 256 KiB of K and V per 512 keys, under 1%).
inline constexpr int kMinKeysPerSplit = 512;
// The combine kernel: one warp per query row (b, h, i), lanes over d; a block's 8 rows are
// consecutive rows of O and LSE, so their 8 floats of LSE go out in one store, one whole
// sector (kCombineLseStore). With one float a row by each warp (a sector issued for 4 bytes,
// 4 rows a block), 4% to 43% of those sectors were merged on the way out of the SMs, varying
// with the kernel's timing (H200, 2026-12-03: bench/gpu/NOTES.md).
inline constexpr int kCombineRowsPerBlock = kFloatsPerSector;
inline constexpr int kCombineThreads = kCombineRowsPerBlock * kWarpSize;
// The workspace: a header of kWorkspaceHeaderBytes (the error word the kernel sets when it
// clamps a bad length or page index, read back by flashlab_decode_check; a whole number of
// sectors), then per (b, h, i, split) the state U (d floats), m (natural log) and l, fp32,
// state_floats(d) floats apart (below).
inline constexpr int64_t kWorkspaceHeaderBytes = 256;

inline constexpr std::array<int64_t, 2> kHeadDims = {64, 128};
inline constexpr uint32_t kDtypeBits = dtype_bit(FLASHLAB_FP16) | dtype_bit(FLASHLAB_BF16);

constexpr bool supports_head_dim(int64_t d) { return d == kHeadDims[0] || d == kHeadDims[1]; }
constexpr bool supports_dtype(int32_t dtype) { return DtypeSet{kDtypeBits}.contains(dtype); }
// flashlab_decode_params.kv_l2_policy: what FLASHLAB_DECODE_L2_AUTO means (decode.h says
// what evict-first is for). The hint keeps the L2's dirty lines from an earlier kernel, whose
// write-back a call would otherwise pay, a fixed saving; its copies cost a little on every
// line, a cost that grows with the cache. So evict-first where the call's K and V (the cache's
// capacity, batch x max_seq_len x KV heads x d x 2) are at most kEvictFirstMaxL2Multiple times
// the L2, plain loads past that. Measured after do_bench's flush, B = 8 at L = 2,048 to 12,288
// and B = 1 to 4 at L = 32,768, evict-first over plain loads (bench/gpu/NOTES.md, "Decode's
// L2 hint by the cache's size"): an H100 (50 MiB of L2) +14% at 1.3 L2s, +7% at 2.6, +2% at
// 3.8, level at 5.1, -1.5 to -2% from 7.7; the H200 (60 MiB) +4% at 2.1 L2s, -2% at 4.3.
inline constexpr int64_t kEvictFirstMaxL2Multiple = 3;
constexpr int32_t auto_kv_l2_policy(double kv_bytes, int64_t l2_bytes) {
  return kv_bytes <= double(kEvictFirstMaxL2Multiple * l2_bytes) ? FLASHLAB_DECODE_L2_EVICT_FIRST
                                                                 : FLASHLAB_DECODE_L2_EVICT_NORMAL;
}
constexpr bool is_kv_l2_policy(int32_t policy) {
  return policy == FLASHLAB_DECODE_L2_AUTO || policy == FLASHLAB_DECODE_L2_EVICT_NORMAL ||
         policy == FLASHLAB_DECODE_L2_EVICT_FIRST;
}
// The policy a call runs with: its own, or for FLASHLAB_DECODE_L2_AUTO the rule above for its
// K and V against the device's L2.
constexpr bool kv_evict_first(int32_t policy, double kv_bytes, int64_t l2_bytes) {
  return (policy == FLASHLAB_DECODE_L2_AUTO ? auto_kv_l2_policy(kv_bytes, l2_bytes) : policy) ==
         FLASHLAB_DECODE_L2_EVICT_FIRST;
}
// The bytes of K and V a call's cache holds: every sequence at its capacity (in double: a
// product of the parameters' ranges may pass 2^63 where no memory could hold it).
constexpr double cache_kv_bytes(int64_t batch, int64_t max_seq_len, int64_t heads_kv, int64_t d,
                                flashlab_dtype dtype) {
  return 2.0 * double(batch) * double(max_seq_len) * double(heads_kv) * double(d) *
         double(dtype_bytes(dtype));
}
constexpr bool is_page_size(int64_t page_size) {
  return page_size >= kMinPageSize && page_size <= kMaxPageSize &&
         (page_size & (page_size - 1)) == 0;
}

// The automatic split count. The grid runs in waves of sm_count x kBlocksPerSm resident
// blocks, and every block of one call does about the same work, so a grid of n blocks keeps
// the GPU busy for a share n / (ceil(n / wave) x wave) of its time: the last wave's empty
// slots are lost. The rule takes the fewest splits whose grid keeps at least
// kMinWaveShare / kWaveShareDen of the slots busy (fewer splits: fewer states to combine),
// else the split count with the best share, capped by the length (kMinKeysPerSplit) and
// kMaxSplits. ANCHORS.md's shape on 132 SMs at 2 blocks per SM (wave = 264): B = 8 has 64
// (b, KV head) blocks a split, 4 splits fill 256 slots (97%); B = 64 has 512, one split
// fills 512 of 2 x 264 (97%); B = 1 would take 32 splits (256 of 264), and takes 16 (128
// blocks, one an SM) by the combine's rule below; B = 16 would take 2 (256 of 264), and takes
// 1 on a contiguous cache (128 blocks, one an SM, no combine) by the lone split's rule below.
// Past kCombineSplitsInFlight splits the combine loads a row's states in more than one group,
// one more round trip to the L2 for every row after the split kernel has ended: at B = 1 (8
// pairs) 16 splits, which fill one block an SM, measured 0 to 5% faster than the wave rule's
// 32 from L = 16,384 on (H200, 2026-12-04, three machines; bench/gpu/NOTES.md, "A lone split
// ends its rows"). So where the wave rule asks for more, the fewest splits within one group
// that fill one block an SM (fills_one_block_an_sm) win, if any do.
inline constexpr int64_t kMinWaveShare = 19, kWaveShareDen = 20;  // 95%
constexpr int min_wave_share_percent() { return int(100 * kMinWaveShare / kWaveShareDen); }
inline constexpr int kCombineSplitsInFlight = 16;  // the combine's states loaded at once
// Whether `blocks` blocks are one wave of one block an SM with at least 95% of the SMs busy:
// at most sm_count of them (past that, two share an SM and the wave is two blocks an SM).
constexpr bool fills_one_block_an_sm(int64_t blocks, int64_t sm_count) {
  return blocks <= sm_count && blocks * kWaveShareDen >= sm_count * kMinWaveShare;
}
// The fewest splits up to `cap` whose grid of blocks x splits keeps at least 95% of the slots
// of its waves of `wave` busy; else (none does) the one with the best share.
constexpr int64_t fewest_filling_splits(int64_t blocks, int64_t wave, int64_t cap) {
  int64_t best = 1, best_busy = 0, best_slots = 1;  // best share = best_busy / best_slots
  for (int64_t splits = 1; splits <= cap; ++splits) {
    const int64_t busy = blocks * splits, slots = (busy + wave - 1) / wave * wave;
    if (busy * kWaveShareDen >= slots * kMinWaveShare) return splits;
    if (busy * best_slots > best_busy * slots) {
      best = splits;
      best_busy = busy;
      best_slots = slots;
    }
  }
  return best;
}
// The most splits a cache of max_seq_len keys takes: none shorter than kMinKeysPerSplit keys,
// at most kMaxSplits.
constexpr int64_t split_cap(int64_t max_seq_len) {
  const int64_t by_length = (max_seq_len + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  return by_length < kMaxSplits ? by_length : kMaxSplits;
}
// And first of all, on a contiguous cache: where one split alone fills one block an SM (126
// to 132 blocks on the H200), one split, which ends its rows in the split kernel with no
// combine at all (split_kernel_ends_rows): at B = 16 (128 blocks) it measured 2 to 4% faster
// than the wave rule's 2 splits up to L = 8,192 and level (-0.2 to +0.2%) from 16,384 to
// 131,072. A paged cache (`paged`) keeps the wave's count there: with one block an SM, nothing
// hides the block table's reads (an entry a tile, a tile ahead) behind another block's copies,
// and pages of 64 keys measured 4.03 TB/s at B = 16, L = 32,768 with one split against 4.28
// with two (4.38 contiguous) (bench/gpu/NOTES.md, "A lone split ends its rows").
constexpr int auto_splits(int64_t batch, int64_t heads_kv, int64_t group_size, int64_t n_q,
                          int64_t max_seq_len, bool paged, int64_t sm_count) {
  const int64_t blocks = batch * heads_kv * row_blocks(group_size, n_q);
  const int64_t wave = sm_count * kBlocksPerSm;
  const int64_t cap = split_cap(max_seq_len);
  if (cap < 1 || blocks <= 0 || wave <= 0) return 1;
  if (!paged && fills_one_block_an_sm(blocks, sm_count)) return 1;  // no combine
  const int64_t splits = fewest_filling_splits(blocks, wave, cap);
  if (splits <= kCombineSplitsInFlight) return int(splits);
  const int64_t one_group = cap < kCombineSplitsInFlight ? cap : kCombineSplitsInFlight;
  for (int64_t within = 1; within <= one_group; ++within)
    if (fills_one_block_an_sm(blocks * within, sm_count)) return int(within);
  return int(splits);
}

// One split's state for one query row in the workspace: U (d floats), then m and l, then
// padding up to a whole number of sectors, so that every state starts on a sector: at
// d = 128, 136 floats, 17 sectors (U's 16 whole, then m and l alone in the 17th). Packed at
// d + 2 floats, three states in four started off a sector, a run of U touched 5 sectors
// instead of 4 and shared its first and last with its neighbours' stores, and what left the
// SMs was 0.91 to 0.93 of the sectors issued, by a merging rule not pinned down
// (docs/IO-LEVELS.md). Padded, no sector is written twice.
FLASHLAB_HOST_DEVICE constexpr int64_t state_floats(int64_t d) {
  return (d + 2 + kFloatsPerSector - 1) / kFloatsPerSector * kFloatsPerSector;
}
static_assert(kWorkspaceHeaderBytes % kSectorBytes == 0, "the first state starts on a sector");
// Their stores, as the sources write them:
//   split kernel, the merge's end: U by 32 lanes along the row (one run of 128 bytes, whole
//     sectors), then m and l together by one lane (an 8-byte store, one sector of its own);
//   combine: O lane by lane along the row (exact), LSE of the block's kCombineRowsPerBlock
//     consecutive rows by warp 0 in one store (one whole sector).
inline constexpr WarpStorePattern kStateUStore = lanes_in_a_row(sizeof(float));
inline constexpr WarpStorePattern kStateMlStore{2 * sizeof(float), 1, 1};  // m and l: a float2
inline constexpr WarpStorePattern kCombineLseStore = block_rows_store(kCombineRowsPerBlock);
constexpr WarpStorePattern combine_o_store(flashlab_dtype dtype) {
  return lanes_in_a_row(dtype_bytes(dtype));
}
// One split on the split grid: the split kernel's merge ends each row itself (O = U / l and
// LSE, what the combine makes of a single state, bit for bit: decode_problem.hpp's
// row_inv_l and row_lse) and the combine kernel is not launched, so the states never go
// through the workspace. Its stores: O lane by lane along the row, the combine's pattern
// (combine_o_store); LSE of a block's packed rows, which are consecutive rows (b, h, i), in one
// store (kLoneSplitLseStore; at GQA 4 and one query, 16 bytes).
FLASHLAB_HOST_DEVICE constexpr bool split_kernel_ends_rows(int64_t splits, bool queue) {
  return splits == 1 && !queue;
}
inline constexpr WarpStorePattern kLoneSplitLseStore = block_rows_store(kMaxRowsPerBlock);
// The persistent grid (05_decode_queue.cu, flashlab_decode_params.grid): sm_count x
// kBlocksPerSm blocks, each taking work items (piece, KV head x row block, batch entry) from a
// queue, an atomic counter in the workspace's header, piece by piece of every sequence in
// turn. A block's ring runs on from one item into the next (the next item's first tiles load
// under the last ones of the item before), so the merge of the warps' states needs SRAM of its
// own beside the ring: 8 packed rows at a time (two passes for 9 to 16 rows), 16.25 KiB at
// d = 128, with which two blocks still fit an SM. Why: the split grid's equal blocks end up to
// a fifth apart, by the SM they run on (bench/gpu/NOTES.md, "Where decode's split blocks
// end"); a queue lets the fast SMs take more.
inline constexpr int kQueuePassRows = 8;
// The claimed item (one int) thread 0 hands to the block's threads, in a 16-byte slot.
inline constexpr int64_t kQueueClaimBytes = 16;
inline constexpr int64_t kSramPerSm = 228 * 1024;    // the H200's shared memory per SM
inline constexpr int64_t kSramReservedPerBlock = 1024;  // what the runtime keeps of it per block
constexpr int64_t queue_merge_bytes(int64_t d) { return merge_bytes(d, kQueuePassRows); }
constexpr int64_t queue_sram_bytes(int64_t d) {
  return ring_bytes(d) + queue_merge_bytes(d) + kQueueClaimBytes;
}
static_assert(kBlocksPerSm * (queue_sram_bytes(128) + kSramReservedPerBlock) <= kSramPerSm &&
                  kBlocksPerSm * (queue_sram_bytes(64) + kSramReservedPerBlock) <= kSramPerSm,
              "two blocks of the persistent grid fit an SM");
// A sequence's pieces shrink along it, so that the queue ends on small items: of P pieces of a
// sequence of T tiles, piece j takes tiles [first(j), first(j + 1)) with first(j) = T -
// floor(T (P - j)^2 / P^2): sizes in proportion to 2 (P - j) - 1, the first 2P - 1 times the
// last. The queue hands them out piece-major (every sequence's piece 0, then every piece 1, ..),
// so the large ones start first and the SMs that finish early take the small last ones.
FLASHLAB_HOST_DEVICE constexpr int piece_first_tile(int64_t tiles, int64_t pieces, int64_t piece) {
  const int64_t left = pieces - piece;
  return int(tiles - tiles * left * left / (pieces * pieces));
}
// The automatic piece count: the most pieces (up to kMaxSplits) whose last piece keeps at least
// kQueueMinLastPieceTiles tiles, T / P^2 >= that many, and at least one piece.
inline constexpr int64_t kQueueMinLastPieceTiles = 4;
constexpr int auto_pieces(int64_t max_seq_len) {
  const int64_t tiles = (max_seq_len + kBc - 1) / kBc;
  int64_t pieces = 1;
  while (pieces < kMaxSplits && tiles >= kQueueMinLastPieceTiles * (pieces + 1) * (pieces + 1))
    ++pieces;
  return int(pieces);
}
// flashlab_decode_params.grid: what FLASHLAB_DECODE_GRID_AUTO means. The split grid: on the
// H200 the queue ran at 0.99 of it at 131072 keys and 0.94 to 0.97 at 32768 (B = 8, 32 / 8
// heads, d = 128; its loop's bookkeeping and each item's start cost more than the balance
// bought: bench/gpu/NOTES.md, "Decode's queue grid").
inline constexpr int32_t kDefaultGrid = FLASHLAB_DECODE_GRID_SPLITS;
constexpr bool is_grid(int32_t grid) {
  return grid == FLASHLAB_DECODE_GRID_AUTO || grid == FLASHLAB_DECODE_GRID_SPLITS ||
         grid == FLASHLAB_DECODE_GRID_QUEUE;
}
constexpr bool uses_queue(int32_t grid) {
  return (grid == FLASHLAB_DECODE_GRID_AUTO ? kDefaultGrid : grid) == FLASHLAB_DECODE_GRID_QUEUE;
}
// Workspace bytes: the header, then batch x heads_q x N_q x splits states.
constexpr int64_t workspace_bytes(int64_t batch, int64_t heads_q, int64_t n_q, int64_t d,
                                  int64_t splits) {
  return kWorkspaceHeaderBytes + batch * heads_q * n_q * splits * state_floats(d) * 4;
}
}  // namespace decode

// 06_fa3.cu: Hopper. TMA brings each work item's Q once (into one of q_buffers SRAM buffers)
// and K, V tiles into a ring of `stages` SRAM buffers
// (a producer warpgroup issues the copies); consumer warpgroups of 64 query rows each run
// S = Q K^T and U += W V as wgmma (Q, K, V from SRAM; W from registers).
//   Br = 128 at d = 128: 2 consumer warpgroups x 64 rows (wgmma's M is 64 per warpgroup);
//     Br = 192 at d = 64: 3 of them (consumer_warpgroups, below).
//   Bc = 128 for d = 64 and d = 128. Registers of a consumer thread at d = 128 (setmaxnreg
//     240): S is a (64, Bc) fp32 accumulator spread over 128 threads = Bc / 2 = 64
//     registers, U is d / 2 = 64, W in bf16 is half of S = 32, and W of the next tile
//     (computed while U += W V still runs, intra-warpgroup overlap) another 32: 192 of 240
//     (ptxas: no spills). Bc = 176 would need 88 + 64 + 44 + 44 = 240 before any address,
//     mask or softmax state, so 128 it is. At d = 64 (setmaxnreg 160): S 64, U 32 and one W
//     buffer 32 (w_buffers).
//   SRAM (d = 128, bf16): sQ (128, 128) 32 KiB + stages x (sK + sV) 2 x 32 KiB; 3 stages =
//     224 KiB of the H200's 227 KiB per block; 2 stages 160 KiB, + sO (128, 128) 32 KiB for
//     the epilogue's TMA stores (below: stages_o), + a second sQ 32 KiB (q_buffers): 224 KiB,
//     226 KiB with the barriers and the alignment slack. At d = 64, 4 stages (default_stages)
//     of 16 KiB sK and sV, two sQ (192, 64) and sO (192, 64) of 24 KiB: 202 KiB (3: 170).
//   Threads: the consumers and a producer warpgroup with warp specialisation (384 at
//     d = 128, 512 at d = 64: threads); without it (d = 128 only) the consumers alone, the
//     first consumer thread issuing the copies itself between its tiles.
//   Grid (flashlab/gpu/tile_schedule.hpp): persistent, one block per SM taking query tiles
//     in fixed turns or from a work queue, or one block per query tile; the same order of
//     tiles every way. By default (fa3::resolve_grid) the work queue with a producer warp,
//     under the causal mask from kAutoQueueMinTiles query tiles a head, without it from
//     kAutoQueueWithoutMaskMinConsumers consumers (d = 64); else persistent up to
//     kAutoPersistentMaxTiles query tiles a head, per tile beyond (flashlab_fa3_grid).
// The tiles are in SRAM in TMA's 128-byte swizzle, d split in slabs of 64 elements (128 bytes,
// the widest row that swizzle takes); every slab of every tile starts 1024-byte aligned.
namespace fa3 {
inline constexpr int kWarpgroupThreads = 4 * kWarpSize;  // wgmma is issued by 4 warps
inline constexpr int kRowsPerConsumer = 64;  // wgmma's M
inline constexpr int kBc = 128;
// Consumer warpgroups per block, each owning kRowsPerConsumer query rows: Br = 128 at
// d = 128, Br = 192 at d = 64 (FlashAttention-3's choice at d <= 64). Why three at d = 64:
// a KV tile's two matmuls there are half as long as at d = 128 while a softmax is as long
// (the same 64 x 128 exponentials), so with two consumers each softmax outlasts the other's
// matmuls and the tensor cores wait; with three, each softmax has two other warpgroups'
// matmuls to run under, and each item's fixed costs (S_0's softmax, the last U += W V, O) are
// shared by 1.5 times the rows. What it costs: the registers (a consumer gets 160, not 240:
// consumer_registers), and query tiles of 192 rows, whose last one in a head of N = 2^k rows
// is partly empty (bench/gpu/NOTES.md, "Three consumer warpgroups at d = 64").
FLASHLAB_HOST_DEVICE constexpr int consumer_warpgroups(int64_t d) { return d < 128 ? 3 : 2; }
inline constexpr int kMaxConsumerWarpgroups = 3;
// Br: the query rows of a work item.
FLASHLAB_HOST_DEVICE constexpr int br(int64_t d) { return consumer_warpgroups(d) * kRowsPerConsumer; }
// Registers per thread after setmaxnreg: the producer warpgroup's and each consumer's. With
// two consumers, 128 x 24 + 256 x 240 = 64512 of the SM's 65536 (384 threads x 168, the cap
// __launch_bounds__(384, 1) gives); with three, 128 x 32 + 384 x 160 = 65536 (512 x 128).
constexpr int producer_registers(int64_t d) { return consumer_warpgroups(d) == 2 ? 24 : 32; }
constexpr int consumer_registers(int64_t d) { return consumer_warpgroups(d) == 2 ? 240 : 160; }
// Registers a thread holds come in steps of 8: the cap __launch_bounds__ gives, and every count
// setmaxnreg may ask for.
inline constexpr int kRegisterStep = 8;
inline constexpr int kRegistersPerSm = 65536;
// What every thread of a block of `threads` may hold at launch (one block per SM).
constexpr int registers_at_launch(int threads) {
  return kRegistersPerSm / threads / kRegisterStep * kRegisterStep;
}
// What setmaxnreg hands out must be what the block was given at launch.
constexpr bool registers_add_up(int64_t d) {
  const int threads = (consumer_warpgroups(d) + 1) * kWarpgroupThreads;
  const int asked = producer_registers(d) + consumer_warpgroups(d) * consumer_registers(d);
  return kWarpgroupThreads * asked <= threads * registers_at_launch(threads) &&
         producer_registers(d) % kRegisterStep == 0 && consumer_registers(d) % kRegisterStep == 0;
}
static_assert(registers_add_up(64) && registers_add_up(128));
// How many W buffers (the A operand of U += W V, in the input dtype) a consumer keeps. Two:
// the softmax of S_j packs W_j into one while U += W_{j-1} V_{j-1} still reads the other,
// the two trading places every KV tile (sections unrolled by two). One, FlashAttention-3's
// order: the softmax writes W_j over S_j in fp32 and it is packed into the one buffer only
// once U += W_{j-1} V_{j-1} has landed. One buffer saves 32 registers, which is what lets a
// consumer fit 160 (three consumers, d = 64: no spill, where two buffers spill 848 bytes);
// with two consumers it cost 1 to 3% at d = 128 (packing is then on the path after the
// product) and was level at d = 64 (H200, 2026-12-02, timed in turns with the two-buffer
// kernel: bench/results/2026-12-02-h200-fa3-w-order.csv).
constexpr int w_buffers(int64_t d) { return consumer_warpgroups(d) == 2 ? 2 : 1; }
// What a consumer thread keeps for a whole KV tile, in registers, with `buffers` W buffers: its
// share of S (64 rows x Bc fp32 over 128 threads), of U (64 rows x d fp32), and of W (64 x Bc
// in the input dtype, two elements a register), before addresses, m, l and temporaries.
constexpr int s_registers() { return kRowsPerConsumer * kBc / kWarpgroupThreads; }
constexpr int u_registers(int64_t d) { return int(kRowsPerConsumer * d / kWarpgroupThreads); }
constexpr int w_registers() { return s_registers() / 2; }
constexpr int consumer_data_registers(int64_t d, int buffers) {
  return s_registers() + u_registers(d) + buffers * w_registers();
}
static_assert(consumer_data_registers(128, w_buffers(128)) < consumer_registers(128) &&
                  consumer_data_registers(64, w_buffers(64)) < consumer_registers(64),
              "a consumer's tiles fit its registers");
// Whether a consumer may leave out the KV tiles its own 64 rows do not see (06_fa3.cu,
// own_tiles): under the causal mask, with Br > Bc, a diagonal item's first consumers end a KV
// tile before its last one; and a head's partly empty query tile of 192 rows, where N is a
// multiple of 128 but not of 192, has consumers with no row: 25% of the consumers' tiles at
// N = 1024 under the causal mask, 11% without it. Measured on the H200 (2026-12-02, in turns,
// two runs): +16% at N = 1024 causal, +6% non-causal, +4 to 7% causal at N = 2048 and 4096,
// within 2.5% at N = 16384 (bench/gpu/NOTES.md, "Consumers that skip the tiles their rows do
// not see, measured"). Compiled where Br > Bc (d = 64) only: at Br = Bc there is less to
// leave out (a ragged N_q, or a bottom-right diagonal that falls inside a KV tile). A call
// leaves them out where consumers_skip_unseen says (below). The same bits either way: a tile
// its rows do not see is wholly masked for them, moves no base, and its alpha is exactly 1
// (06_fa3.cu, move_base; before alpha was made so, the bits differed in the last place under
// a causal mask, within the 2x rule: bench/gpu/NOTES.md).
FLASHLAB_HOST_DEVICE constexpr bool skips_unseen_tiles(int64_t d) { return br(d) > kBc; }
// The most K and V stages any call takes (the mbarrier rings are this long); at d = 128 the
// SRAM holds 3 (max_stages, below).
inline constexpr int kMaxStages = 4;
// The pipeline's defaults per head dimension (what FLASHLAB_FA3_AUTO in
// flashlab_fa3_options.stages and .ping_pong resolves to): d = 128: 2 stages, ping-pong on;
// d = 64: 4 stages, ping-pong off. Why 4 at d = 64: fa3's pipeline log there (d = 64 causal,
// N = 1024) has each consumer waiting 300 to 500 ns a section for its K and V tile with 3
// stages; a fourth, timed in turns against 3 (2026-12-04,
// bench/results/2026-12-04-h200-fa3-four-stages-d64.csv, N = 512..16384): causal 0.999 1.015
// 1.019 1.011 1.010 1.015, non-causal 1.006 1.000 0.995 1.003 1.002 1.004; a second run
// (-repeat.csv, N = 1024, 2048, 4096, 16384): causal 1.025 0.996 1.005 0.998, non-causal
// 1.013 1.000 0.996 1.007. It gains at short N under the mask and is level beyond. Before
// it, measured on the H200 (2026-12-02, each setting of the same kernel timed in turns,
// bench/results/2026-12-02-h200-fa3-d64-defaults.csv): at d = 64, 3
// stages without ping-pong over 2 with it, N = 1024, 4096, 16384: non-causal 1.034 1.024
// 1.018, causal 1.047 1.029 1.019 (on two other builds of the day, N = 1024 to 16384: +2.2
// to +4.3% and +1.4 to +5.9%). Ping-pong makes one warpgroup's matmuls wait for the other's
// softmax; at d = 64 a softmax (64 ex2 per warp at 8 cycles each, and the max pass before
// them) outlasts the other's two matmuls (512 tensor-core cycles), so the turns only add
// waiting. With three consumers at d = 64 (consumer_warpgroups), the same kernel timed in
// turns at N = 512..16384, both masks
// (bench/results/2026-12-02-h200-three-consumers-d64-pipeline.csv): 3 stages
// without ping-pong over 2 stages 1.005 to 1.045, over ping-pong (3 stages) 0.997 to 1.033,
// over both 1.008 to 1.053; the ablation run of the same build (N = 8192) read 2 stages 5.6%
// and 2.9% ahead instead, a spread between runs that the sweep's 12 points outweigh. At d = 128 the
// matmuls are twice as long and the turns pay (ablation, N = 8192: off 0.985 and 0.952 of on,
// non-causal and causal; bench/results/2026-12-02-h200-fa3-ablation-across.csv), and a
// third stage would take the SRAM of the second Q buffer and of sO (stages_o, q_buffers).
constexpr int default_stages(int64_t d) { return d < 128 ? 4 : 2; }
constexpr bool default_ping_pong(int64_t d) { return d >= 128; }
// The options a call at head dimension d runs with: FLASHLAB_FA3_AUTO in stages and ping_pong
// replaced by d's defaults, every other field as given.
constexpr flashlab_fa3_options resolve_options(int64_t d, flashlab_fa3_options o) {
  if (o.stages == FLASHLAB_FA3_AUTO) o.stages = default_stages(d);
  if (o.ping_pong == FLASHLAB_FA3_AUTO) o.ping_pong = default_ping_pong(d) ? 1 : 0;
  return o;
}
inline constexpr int kSlab = 64;           // elements of d per 128-byte swizzled row
inline constexpr int kSwizzleAtom = 1024;  // 8 rows x 128 bytes: a tile's base alignment
inline constexpr int kAlignBytes = 16;     // TMA: global address and every stride
// The mbarriers (Q's, full and empty per stage) and a work item slot per Q buffer, padded.
inline constexpr int kBarrierBytes = 1024;
inline constexpr flashlab_fa3_grid kDefaultGrid = FLASHLAB_FA3_GRID_AUTO;
// flashlab_fa3_options.software_exp2: on the unmasked tiles, the k16 slices kk of W (16 keys
// each, Bc / 16 of them) with kk % kSoftwareExp2Period == kSoftwareExp2Period - 1 take their
// exponentials from software_exp2 (flashlab/gpu/exp2_software.hpp, FMA pipe) instead of
// ex2.approx (MUFU): 1 in 4, 2 of the 8 slices at Bc = 128. Why: per (row, key) the softmax
// takes one exponential (MUFU: 16 a clock per SM) against 4 d FLOPs of matmul (wgmma: about
// 4096 bf16 FLOPs a clock per SM); at d = 64 (with two consumers, when this was measured)
// a consumer's (64, 128) tile is 8192
// exponentials, 512 MUFU clocks, as long as the other consumer's two matmuls (2 x 64 x 128 x
// 64 x 2 FLOPs / 4096 = 512 clocks). With 1 in 4 on the FMA pipe the MUFU's share is 384
// clocks, under the matmuls'. Measured on the H200: 2 to 8% slower at every shape (1 to 7%
// with 1 in 8): the softmax's issue slots, not MUFU, are the limit (bench/gpu/NOTES.md).
inline constexpr int kSoftwareExp2Period = 4;
static_assert(kBc / 16 % kSoftwareExp2Period == 0, "every slice period is whole in a tile");
// FLASHLAB_FA3_GRID_AUTO's rule where it does not take the work queue (no causal mask, no
// producer warp, or short heads): persistent while a head has at most this many query tiles
// (N_q <= 8192 at d = 128's Br = 128, N_q <= 12288 at d = 64's Br = 192), one block per
// tile beyond. Measured on the H200 (2026-12-01,
// bench/results/2026-12-01-h200-fa3v3-grids.csv, same work at every N): persistent over per
// tile 1.00 to 1.29 at N = 512 to 8192 (d 64 and 128, causal or not; short heads gain most,
// their set-up and tail being a larger share), 0.93 to 1.00 at N = 16384.
inline constexpr int64_t kAutoPersistentMaxTiles = 64;
// Under the causal mask FLASHLAB_FA3_GRID_AUTO takes the work queue where a head has at least
// this many query tiles (N_q > 896 at d = 128's Br = 128, N_q > 1344 at d = 64's Br = 192;
// measured there before d = 64 had three consumers). Measured on the H200 with each shape's
// implementations timed in turns (2026-12-02, bench/results/2026-12-02-h200-fa3-grids-turns.csv,
// one run, where the same kernel on the same grid timed twice agreed within 0.990x to 1.022x),
// the queue over the persistent turns, causal, N = 512 .. 16384: d = 128 1.005 1.031 1.012
// 1.039 1.043 1.150; d = 64 0.980 1.001 1.011 1.040 1.041 1.036 (over one block per tile at
// N = 16384, the old default there: 1.019 and 1.015). At 4 tiles a head the queue loses 2% at
// d = 64, as it did when timed after the turns (-fa3-grids.csv, three runs), though the
// KV-tile count gives it +2.5%, and is level at d = 128; from 8 it is level or ahead at every
// point.
inline constexpr int64_t kAutoQueueMinTiles = 8;
// Without the mask FLASHLAB_FA3_GRID_AUTO takes the work queue too where a block runs this
// many consumer warpgroups or more (d = 64's three), with a producer warp, at any length: the
// tiles do equal work, but the blocks do not finish them in step, and the queue hands the
// next tile to whichever is free. Measured on the H200 in balanced turns (2026-12-03,
// bench/results/2026-12-03-h200-fa3-grids-nomask.csv; -fa3-settings-n1024-2048.csv a second
// run at N = 1024, 2048), the queue over the rule before (persistent up to
// kAutoPersistentMaxTiles query tiles a head, per tile beyond), N = 1024..16384: d = 64 1.020
// 1.021 1.018 1.006 1.010 (second run 1.015, 1.036); d = 128 1.000 1.015 1.000 1.005 1.005,
// with persistent itself at 1.007 1.019 0.992 1.002 1.006: level, so two consumers keep the
// rule before.
inline constexpr int kAutoQueueWithoutMaskMinConsumers = 3;
// flashlab_fa3_options.overlap_items's default: off. Measured on the H200 (2026-12-02, one
// run in turns, bench/results/2026-12-02-h200-fa3-across-v2.csv), across items over apart,
// N = 512..16384: d = 128 non-causal 0.998 1.008 1.010 1.010 1.009 1.000, causal 0.997
// 0.956 0.977 1.003 1.021 0.992; d = 64 non-causal 0.953 0.978 0.990 0.997 1.002 0.990,
// causal 0.975 0.922 0.948 0.969 0.992 0.974. Where the next item's Q or K_0 has not
// landed by the item's last section (short sections at d = 64; the work queue publishing
// the next item late), S_0 and O wait for it, which apart they do not (bench/gpu/NOTES.md).
inline constexpr int kDefaultOverlapItems = 0;
// Whether the default kernel (warp specialised, intra-warpgroup overlap, standard rule)
// carries the code that chains work items, read at run time, or is compiled without it when
// overlap_items = 0. The work is the same, and so is the main loop's list of instructions;
// the order ptxas schedules them in and the registers it gives them are not, and the speed
// follows. Measured on the H200 (2026-12-02, nvcc 13): at d = 64, the two timed in turns in
// two runs, without the code 7 to 9% slower at N = 16384 non-causal (410.2 and 406.8 against
// 441.3 and 444.7 TFLOP/s; one item per block, so the chaining never runs); at d = 128 without
// it faster: 1.02 to 1.07 of cuDNN from N = 2048 non-causal, where the kernel with it read 0.98
// to 1.03 in the runs before (not in turns with each other), and +3 to +10% over it in turns
// from N = 2048 in a build since dropped (s from the parameters). Why, in the SASS: not
// settled (bench/gpu/NOTES.md, "Same instructions, 4 to 8% apart").
constexpr bool chain_code_in_default_kernel(int64_t d) { return d < 128; }
// The options a call runs with unless it gives its own (flashlab_fa3_default_options): every
// idea of FlashAttention-3 on, the pipeline's depth and ping-pong left to the head dimension
// (resolve_options, above), FlashAttention-4's two switches off.
constexpr flashlab_fa3_options default_options() {
  flashlab_fa3_options o{};
  o.warp_specialized = 1;
  o.stages = FLASHLAB_FA3_AUTO;
  o.ping_pong = FLASHLAB_FA3_AUTO;
  o.intra_overlap = 1;
  o.conditional_rescale = 0;
  o.rescale_counts = nullptr;
  o.grid = kDefaultGrid;
  o.software_exp2 = 0;
  o.overlap_items = kDefaultOverlapItems;
  o.kv_l2_share = FLASHLAB_FA3_AUTO;
  return o;
}
// The share of the L2 the tile order plans the K and V of the heads in flight to take (the
// rest is left to the Q tiles read and the O tiles written meanwhile), as {numerator,
// denominator}: a quarter without the mask, a half under it. A head whose blocks run on
// both sides of the L2 is held in both partitions (docs/IO-LEVELS.md, "fa3's DRAM bytes"), so
// sections planned on half of it filled both: at 16 heads x N = 4096, d = 128 the section of
// 15 heads read 129.7 MiB from DRAM for 48. Measured on the H200 (2026-12-02,
// bench/results/2026-12-02-h200-fa3-quarter-l2-d{64,128}{,-repeat}.csv, in turns, two runs),
// a quarter over a half, N = 512..16384: d = 128 non-causal 1.028/1.018 1.069/1.068
// 1.028/1.051 1.046/1.033 1.017/1.032 0.999/1.027; d = 64 non-causal 1.001/1.003 0.996/1.002
// 1.016/1.044 1.034/1.030 1.012/1.027 1.000/1.000. DRAM read (ncu, B = 16384 / N, H = 16,
// d = 128, not causal): N = 1024 477 -> 247 MB, N = 4096 597 -> 263 MB (cuDNN 201 at both).
// Under the causal mask the section also sets how evenly the tiles, longest first in each
// section, share the blocks: there a quarter measured d = 128 1.003/0.999 1.020/1.017
// 1.024/1.034 0.965/0.984 0.982/0.989 1.064/1.053, d = 64 0.997/0.998 1.001/0.999 1.016/0.989
// 1.007/1.000 0.959/0.972 0.983/0.998, losing at N = 4096 and 8192 (d = 128) and 8192 and
// 16384 (d = 64), where the busiest block's share over the mean, dispatched or from the work
// queue, rises from under 1.07 to 1.072 (d = 64, N = 8192) and 1.102 (d = 128, N = 4096)
// (tests/gpu/test_tile_schedule.cpp); so there the share stays a half (but at d = 128 for
// short heads: auto_kv_l2_share, below).
inline constexpr int64_t kL2ShareForKV[2][2] = {{1, 4}, {1, 2}};  // [causal]
// flashlab_fa3_options.kv_l2_share: a share of the L2 in percent, 1 to kMaxKvL2Share, for
// experiments on the order (docs/IO-LEVELS.md, "Sections that fill a side of the L2").
inline constexpr int kMaxKvL2Share = 100;
constexpr bool is_kv_l2_share(int32_t share) {
  return share == FLASHLAB_FA3_AUTO || (share >= 1 && share <= kMaxKvL2Share);
}
// kL2ShareForKV's share in percent, as kv_l2_share gives one.
constexpr int32_t kv_l2_share_percent(bool causal) {
  return int32_t(kMaxKvL2Share * kL2ShareForKV[causal][0] / kL2ShareForKV[causal][1]);
}
// What FLASHLAB_FA3_AUTO plans on for a problem: kL2ShareForKV's share (FLASHLAB_FA3_AUTO
// back), except a quarter (25) under the mask at d = 128 while a head has at most
// kQuarterMaxQueryTiles query tiles. There an item has at most as many KV tiles, each with
// its Q load and O store, and fa3 is nearest its memory side: with half the L2 the section's
// K and V fill a side of it (K and V are held on both) and go back to DRAM. Measured on an
// H100 (2026-12-06, bench/results/h100/2026-12-06-h100-fa3-kv-l2-share-short{,-repeat}.csv,
// in turns, two runs), a quarter over the half: N = 768 1.069 / 1.065, 1,024 1.071 / 1.067,
// 1,536 1.030 / 1.029, then 2,048 1.012 / 1.010 and 3,072 0.992 / 0.997; DRAM at N = 1,024,
// B = 16, H = 16: 193 MiB against 248 (`-n1024-dram.csv`). On the H200 (2026-12-02, above:
// the fixed turns then) +2.0 / +1.7% at 1,024, -3.5 / -1.6% at 4,096. At d = 64 a quarter is
// no faster at any N (0.96 to 1.00 on the H100): its time does not follow the bytes.
inline constexpr int kQuarterMaxQueryTiles = 12;
constexpr int32_t auto_kv_l2_share(bool causal, int64_t d, int64_t query_tiles) {
  return causal && d == 128 && query_tiles <= kQuarterMaxQueryTiles ? kv_l2_share_percent(false)
                                                                    : FLASHLAB_FA3_AUTO;
}
// The bytes of K and V one section of the tile order may plan on (make_tile_order): the
// share above, or, with FLASHLAB_FA3_AUTO, kL2ShareForKV's for the mask.
constexpr int64_t kv_section_budget(int64_t l2_bytes, bool causal,
                                    int32_t share = FLASHLAB_FA3_AUTO) {
  if (share != FLASHLAB_FA3_AUTO) return l2_bytes * share / kMaxKvL2Share;
  return l2_bytes * kL2ShareForKV[causal][0] / kL2ShareForKV[causal][1];
}
inline constexpr int64_t kMaxGridX = 2147483647;  // CUDA's limit on gridDim.x
constexpr int threads(bool warp_specialized, int64_t d) {
  return (consumer_warpgroups(d) + (warp_specialized ? 1 : 0)) * kWarpgroupThreads;
}
// The barriers, sQ (q_buffers x (Br, d), below), then stages x (sK (Bc, d), sV (Bc, d)),
// then sO (Br, d) where O is staged (below); 1024 bytes of slack so the kernel can round the
// dynamic SRAM base up to the swizzle atom. ring_sram_bytes counts one Q buffer.
constexpr int64_t tile_bytes(int64_t rows, int64_t d, flashlab_dtype dtype) {
  return rows * d * dtype_bytes(dtype);
}
constexpr int64_t ring_sram_bytes(int64_t d, flashlab_dtype dtype, int stages) {
  return kSwizzleAtom + kBarrierBytes + tile_bytes(br(d), d, dtype) +
         stages * 2 * tile_bytes(kBc, d, dtype);
}
inline constexpr int64_t kMaxSramPerBlock = 232448;  // H200, with the opt-in attribute
// The epilogue. Where the SRAM has room for sO beside the ring, each consumer warpgroup
// writes its (64, d) of O = U / l into sO (in the input dtype, 128-byte swizzle) and one of
// its threads sends it to HBM with TMA stores, whole lines, while the warpgroup goes on to
// its next tile; that is every setting but 3 stages at d = 128 (224 KiB of ring), where O
// is stored from the registers, 4 bytes a thread and store, half a 32-byte sector each.
constexpr bool stages_o(int64_t d, flashlab_dtype dtype, int stages) {
  return ring_sram_bytes(d, dtype, stages) + tile_bytes(br(d), d, dtype) <= kMaxSramPerBlock;
}
// Q's buffers. Two where a second Q tile fits beside the ring and sO: the producer loads the
// next work item's Q while the consumers still read this one's, and, with overlap_items on
// (off by default, kDefaultOverlapItems), the consumers issue the next item's S_0 = Q K_0^T
// under this item's last U += W V (06_fa3.cu, "across work items": the item's first and last
// sections then overlap as every other section does). Every
// setting but 3 stages at d = 128 (224 KiB of ring and no sO), which keeps one.
inline constexpr int kMaxQBuffers = 2;
constexpr int q_buffers(int64_t d, flashlab_dtype dtype, int stages) {
  const int64_t o = stages_o(d, dtype, stages) ? tile_bytes(br(d), d, dtype) : 0;
  return ring_sram_bytes(d, dtype, stages) + o + tile_bytes(br(d), d, dtype) <= kMaxSramPerBlock
             ? kMaxQBuffers
             : 1;
}
constexpr int64_t sram_bytes(int64_t d, flashlab_dtype dtype, int stages) {
  return ring_sram_bytes(d, dtype, stages) +
         (stages_o(d, dtype, stages) ? tile_bytes(br(d), d, dtype) : 0) +
         (q_buffers(d, dtype, stages) - 1) * tile_bytes(br(d), d, dtype);
}
// The most stages a block of head dimension d holds: kMaxStages at d = 64 (202 KiB), 3 at
// d = 128 (224 KiB; a fourth would need 288). What flashlab_fa3_options.stages may ask for.
constexpr int max_stages(int64_t d, flashlab_dtype dtype) {
  int stages = kMaxStages;
  while (stages > 1 && sram_bytes(d, dtype, stages) > kMaxSramPerBlock) --stages;
  return stages;
}
// Whether a call's consumers run across work items (flashlab_fa3_options.overlap_items): asked
// for, with a producer warpgroup, under the standard rule (the conditional rule's kernels keep
// items apart), and with a second Q buffer in SRAM (q_buffers).
FLASHLAB_HOST_DEVICE constexpr bool runs_across_items(bool overlap_items, bool warp_specialized,
                                                      bool conditional, int q_buffers) {
  return overlap_items && warp_specialized && !conditional && q_buffers == kMaxQBuffers;
}
// Whether a call's consumers leave out the KV tiles their rows do not see: where the kernel
// may (skips_unseen_tiles of its d), a producer issues the loads (without one, the first
// consumer warp issues them and must walk every tile), ping-pong is off (its turns need every
// consumer to take as many) and items run apart.
FLASHLAB_HOST_DEVICE constexpr bool consumers_skip_unseen(int64_t d, bool warp_specialized,
                                                          bool ping_pong, bool across_items) {
  return skips_unseen_tiles(d) && !ping_pong && !across_items && warp_specialized;
}
static_assert(max_stages(128, FLASHLAB_BF16) == 3 && max_stages(64, FLASHLAB_BF16) == kMaxStages,
              "three stages of d = 128 fit an H200 block, and kMaxStages of d = 64");
static_assert(default_stages(64) <= max_stages(64, FLASHLAB_FP16) &&
                  default_stages(128) <= max_stages(128, FLASHLAB_FP16),
              "each d's default stages fit its block");
static_assert(stages_o(128, FLASHLAB_BF16, default_stages(128)) &&
                  stages_o(64, FLASHLAB_BF16, kMaxStages),
              "the default stages at d = 128, and every setting at d = 64, stage O");
static_assert(q_buffers(128, FLASHLAB_BF16, default_stages(128)) == kMaxQBuffers &&
                  q_buffers(64, FLASHLAB_BF16, kMaxStages) == kMaxQBuffers &&
                  q_buffers(128, FLASHLAB_BF16, max_stages(128, FLASHLAB_BF16)) == 1,
              "two Q buffers at the default stages and at d = 64; one at 3 stages of d = 128");
constexpr KernelConfig config(int64_t d, flashlab_dtype dtype) {
  KernelConfig c;
  c.Br = br(d);
  c.Bc = kBc;
  c.threads = threads(true, d);
  c.sram_bytes = sram_bytes(d, dtype, default_stages(d));
  c.blocks_per_sm = 1;
  c.s = {FLASHLAB_MEMORY_REGISTERS, FLASHLAB_FP32};
  c.w = {FLASHLAB_MEMORY_REGISTERS, dtype};  // rounded to the input dtype: wgmma's A operand
  c.kv_passes = 1;
  c.pointer_align_bytes = kAlignBytes;
  c.stride_align_elements = int(kAlignBytes / dtype_bytes(dtype));
  // O from the wgmma accumulator where it is not staged (stages_o false: 3 stages at d = 128);
  // where it is, TMA stores carry whole rows of sO and the pattern is not used.
  c.o_store = kFragmentPairStore;
  c.lse_store = kFragmentLseStore;
  return c;
}
}  // namespace fa3

// 06_fa3_backward.cu: the backward on Hopper's tensor cores (FlashAttention-3's backward),
// the main kernel of the default (non-deterministic, no dropout) backward; preprocess and
// convert are fa2_backward's. A block owns Bc = 128 keys of one (batch, KV head) and loops
// over the query tiles of Br = 64 rows of its GQA group's query heads, as fa2_backward does.
//   Threads: 2 warpgroups, no producer (thread 0 issues the TMA copies between steps); each
//     warpgroup owns 64 of the Bc keys, wgmma's M: S^T = K Q^T and dP^T = V dO^T are
//     (64 keys, Br) accumulators, P^T and dS^T then feed dV += P^T dO and dK += dS^T Q
//     straight from registers (wgmma's A from registers), and dQ += dS K, with dS^T read
//     back from SRAM, is split between the warpgroups by 64-column slabs of d at d = 128,
//     by their own keys at d = 64; there the two (Br, 64) partials meet in SRAM (sdQx):
//     each warpgroup hands the other the 32 columns it does not add, so each adds (Br, 32)
//     and dQ takes Br d reductions per step at both head dimensions.
//   Registers of a thread at d = 128: dK and dV (64, d) fp32 = 64 + 64, S^T and dP^T
//     (64, 64) fp32 = 32 + 32, P^T packed = 16: 208 at the peak (S^T, dP^T); while dQ runs,
//     dK + dV + P^T + dS^T packed + dQ (64, 64) = 64 + 64 + 16 + 16 + 32 = 192. 256
//     threads x 255 registers fit the register file: one block per SM. One warpgroup owning
//     all 128 keys would need 256 registers for dK and dV alone; a producer warpgroup
//     (384 threads) would leave at most 168 per thread without setmaxnreg.
//   SRAM (d = 128, bf16): sK, sV (128, 128) 32 KiB each; sQ, sdO 2 buffers x (64, 128)
//     16 KiB each; sdS^T (128, 64) 16 KiB; sL, sD 2 x 64 fp32 each; barriers; 1024 bytes of
//     slack for the swizzle atom's alignment: 147 KiB. At d = 64, 83 KiB + sdQx (2, Br, 32)
//     fp32 16 KiB = 99 KiB.
// Which backward runs (the one rule): v3 when the call is not deterministic, has no
// dropout and no row stride of 0 among Q, K, V and dO (which TMA cannot describe); v2
// (fa2_backward) otherwise. The deterministic mode's dQ kernel and the dropout replay are v2's.
namespace fa3_backward {
inline constexpr int kWarpgroups = 2;
inline constexpr int kThreads = kWarpgroups * fa3::kWarpgroupThreads;
inline constexpr int kKeysPerWarpgroup = fa3::kRowsPerConsumer;  // wgmma's M
inline constexpr int kBc = kWarpgroups * kKeysPerWarpgroup;      // keys per block
inline constexpr int kBr = 64;                                   // query rows per step
inline constexpr int kBuffers = 2;                               // Q, dO, L, D double-buffered
inline constexpr int kBlocksPerSm = 1;
inline constexpr int kBarrierBytes = 1024;  // mbarriers (K and V, Q and dO per buffer), padded
// dQ's exchange: where d is narrower than one slab per warpgroup (d = 64), both warpgroups
// form dQ_i over all of d and each adds only 1 / kWarpgroups of its columns, receiving the
// other's partial of them through sdQx (kWarpgroups, Br, d / kWarpgroups) fp32; none at 128.
constexpr bool dq_exchanged(int64_t d) { return d / fa3::kSlab < kWarpgroups; }
constexpr int64_t dq_exchange_floats(int64_t d) { return dq_exchanged(d) ? kBr * d : 0; }
// The SRAM a block takes (the kernel's layout, in this order): slack for the swizzle atom,
// barriers, sK and sV (Bc, d), sQ and sdO (kBuffers, Br, d), sdS^T (Bc, Br) in the input
// dtype, then sL and sD (kBuffers, Br) fp32, then sdQx fp32 (d = 64 only).
constexpr int64_t sram_bytes(int64_t d, flashlab_dtype dtype) {
  return fa3::kSwizzleAtom + kBarrierBytes +
         dtype_bytes(dtype) * (2 * kBc * d + 2 * kBuffers * kBr * d + kBc * kBr) +
         int64_t(sizeof(float)) * (2 * kBuffers * kBr + dq_exchange_floats(d));
}
// Its stores, as 06_fa3_backward.cu writes them (preprocess and convert: fa2_backward's):
//   write_dk_dv: dK, dV straight from the wgmma accumulators, a 32-bit pair of 16-bit
//     elements per row, 8 rows x 16 bytes an instruction (2x the data), as v2;
//   dQ_i += dS K: backward_steps::add_dq_tile, red.global.add.v4.f32 over 16 rows (exact),
//     as v2; each warpgroup adds dq_columns_added(d) columns of the Br rows: a slab at
//     d = 128, half of d after the exchange at d = 64, so a step reduces dQ_i once.
inline constexpr WarpStorePattern kDkDvStore = kFragmentPairStore;
inline constexpr WarpStorePattern kDqReduction = fa2_backward::kDqReduction;
constexpr int64_t dq_columns_added(int64_t d) {
  return dq_exchanged(d) ? d / kWarpgroups : fa3::kSlab;
}
// How many times a step's reductions cover dQ_i (Br, d): the warpgroups' columns over d.
constexpr int dq_reduction_passes(int64_t d) { return int(kWarpgroups * dq_columns_added(d) / d); }
static_assert(dq_reduction_passes(64) == 1 && dq_reduction_passes(128) == 1);
// The rule: whether a call runs on v3 (see above).
constexpr bool takes(bool deterministic, bool dropout, bool row_stride_zero) {
  return !deterministic && !dropout && !row_stride_zero;
}
constexpr KernelConfig config(int64_t d, flashlab_dtype dtype) {
  KernelConfig c = fa2_backward::config(d, dtype);
  c.Br = kBr;
  c.Bc = kBc;
  c.threads = kThreads;
  c.sram_bytes = sram_bytes(d, dtype);
  c.blocks_per_sm = kBlocksPerSm;
  c.pointer_align_bytes = fa3::kAlignBytes;
  c.stride_align_elements = int(fa3::kAlignBytes / dtype_bytes(dtype));
  return c;
}
static_assert(sram_bytes(128, FLASHLAB_BF16) <= fa3::kMaxSramPerBlock);
}  // namespace fa3_backward

// The ladder, simplest first: the one list of kernels.
inline constexpr std::array kKernels = {
    KernelRecord{FLASHLAB_KERNEL_NAIVE, "naive",
                 "cuBLAS S = Q K^T, a softmax kernel, cuBLAS O = P V; S and P live in HBM",
                 HeadDims{},
                 {dtype_bit(FLASHLAB_FP32) | dtype_bit(FLASHLAB_FP16) | dtype_bit(FLASHLAB_BF16)}},
    KernelRecord{FLASHLAB_KERNEL_SCALAR, "scalar",
                 "one thread per query row, fp32 online softmax over K/V tiles in SRAM",
                 HeadDims{{64, 128}, 2},
                 {dtype_bit(FLASHLAB_FP32) | dtype_bit(FLASHLAB_FP16) | dtype_bit(FLASHLAB_BF16)}},
    KernelRecord{FLASHLAB_KERNEL_FA2, "fa2",
                 "FlashAttention-2: mma.sync tensor cores, cp.async double buffering",
                 HeadDims{{64, 128}, 2},
                 {dtype_bit(FLASHLAB_FP16) | dtype_bit(FLASHLAB_BF16)},
                 /*dropout=*/true},
    KernelRecord{FLASHLAB_KERNEL_FA3, "fa3",
                 "FlashAttention-3 (Hopper): TMA, wgmma, producer/consumer warpgroups",
                 HeadDims{{64, 128}, 2},
                 {dtype_bit(FLASHLAB_FP16) | dtype_bit(FLASHLAB_BF16)}},
};

// The record of a kernel, or nullptr for an id or name that is not in the ladder.
constexpr const KernelRecord* find_kernel(int32_t id) {
  for (const KernelRecord& k : kKernels)
    if (k.id == id) return &k;
  return nullptr;
}
constexpr const KernelRecord* find_kernel(std::string_view name) {
  for (const KernelRecord& k : kKernels)
    if (k.name == name) return &k;
  return nullptr;
}

constexpr bool is_known_dtype(int32_t dtype) {
  for (flashlab_dtype t : kDtypes)
    if (t == dtype) return true;
  return false;
}

constexpr bool supports(flashlab_kernel kernel, int64_t d, flashlab_dtype dtype) {
  const KernelRecord* k = find_kernel(kernel);
  return k != nullptr && k->head_dims.contains(d) && k->dtypes.contains(dtype);
}

// The configuration of a supported (kernel, d, dtype); all zero for one not supported.
constexpr KernelConfig kernel_config(flashlab_kernel kernel, int64_t d, flashlab_dtype dtype) {
  if (!supports(kernel, d, dtype)) return {};
  switch (kernel) {
    case FLASHLAB_KERNEL_NAIVE: return naive::config(dtype);
    case FLASHLAB_KERNEL_SCALAR: return scalar::config(d, dtype);
    case FLASHLAB_KERNEL_FA2: return fa2::config(d, dtype);
    case FLASHLAB_KERNEL_FA3: return fa3::config(d, dtype);
  }
  return {};
}

// The sentences that validation and flashlab_kernel_info() say, built from the table above.
namespace text {

// "a", "a or b", "a, b or c".
inline std::string one_of(const std::string* items, int count, const char* last_word) {
  std::string out;
  for (int i = 0; i < count; ++i)
    out += (i == 0 ? "" : i + 1 == count ? std::string(" ") + last_word + " " : ", ") + items[i];
  return out;
}

// "d in {64, 128}" or "any d in [1, 1073741823]".
inline std::string describe(const HeadDims& dims) {
  if (dims.count == 0) return "any d in [1, " + std::to_string(dims.max) + "]";
  std::string out = "d in {";
  for (int i = 0; i < dims.count; ++i) out += (i ? ", " : "") + std::to_string(dims.values[i]);
  return out + "}";
}

// "fp16 or bf16".
inline std::string describe(const DtypeSet& dtypes) {
  std::string names[kDtypes.size()];
  int count = 0;
  for (flashlab_dtype t : kDtypes)
    if (dtypes.contains(t)) names[count++] = std::string(dtype_name(t));
  return one_of(names, count, "or");
}

// "0 (naive), 1 (scalar) or 2 (fa2)": the values an unknown kernel id could have been.
inline std::string known_kernels() {
  std::string items[kKernels.size()];
  for (size_t i = 0; i < kKernels.size(); ++i)
    items[i] = std::to_string(kKernels[i].id) + " (" + std::string(kKernels[i].name) + ")";
  return one_of(items, int(kKernels.size()), "or");
}

// "fa2": the kernels that apply dropout, by name.
inline std::string dropout_kernels() {
  std::string names[kKernels.size()];
  int count = 0;
  for (const KernelRecord& k : kKernels)
    if (k.dropout) names[count++] = std::string(k.name);
  return one_of(names, count, "or");
}

// "0 (fp32), 1 (fp16) or 2 (bf16)".
inline std::string known_dtypes() {
  std::string items[kDtypes.size()];
  for (size_t i = 0; i < kDtypes.size(); ++i)
    items[i] = std::to_string(kDtypes[i]) + " (" + std::string(dtype_name(kDtypes[i])) + ")";
  return one_of(items, int(kDtypes.size()), "or");
}

// "the naive kernel takes " or "the naive and scalar kernels take ", for the kernels other
// than `except` that `takes`; empty when there are none.
template <class Takes>
std::string other_kernels(flashlab_kernel except, Takes takes) {
  std::string names[kKernels.size()];
  int count = 0;
  for (const KernelRecord& k : kKernels)
    if (k.id != except && takes(k)) names[count++] = std::string(k.name);
  if (count == 0) return "";
  return "the " + one_of(names, count, "and") + (count == 1 ? " kernel takes " : " kernels take ");
}

// Why `kernel` does not take (d, dtype), and what would; empty when it does.
inline std::string unsupported_reason(const KernelRecord& kernel, int64_t d,
                                      flashlab_dtype dtype) {
  const std::string by = " is not supported by the " + std::string(kernel.name) + " kernel: it ";
  if (!kernel.head_dims.contains(d)) {
    const std::string d_text = "d = " + std::to_string(d);
    const std::string others =
        other_kernels(kernel.id, [d](const KernelRecord& k) { return k.head_dims.contains(d); });
    return d_text + by + "takes " + describe(kernel.head_dims) +
           (others.empty() ? "" : "; " + others + d_text);
  }
  if (!kernel.dtypes.contains(dtype)) {
    const std::string name(dtype_name(dtype));
    const std::string others = other_kernels(
        kernel.id, [dtype](const KernelRecord& k) { return k.dtypes.contains(dtype); });
    return "dtype " + name + by + "takes " + describe(kernel.dtypes) +
           (others.empty() ? "" : "; " + others + name);
  }
  return "";
}

}  // namespace text

// Everything known about one (kernel, d, dtype).
struct KernelInfo {
  const KernelRecord* kernel = nullptr;  // nullptr for an unknown kernel id
  bool supported = false;
  std::string reason;   // why not, and what would be right; empty when supported
  KernelConfig config;  // all zero when not supported
};

// kernel and dtype are taken as plain integers, so that a value outside the enums is
// answered with a reason rather than being undefined.
inline KernelInfo kernel_info(int32_t kernel, int64_t d, int32_t dtype) {
  KernelInfo info;
  info.kernel = find_kernel(kernel);
  if (info.kernel == nullptr) {
    info.reason = "kernel = " + std::to_string(kernel) + " is unknown: use " + text::known_kernels();
    return info;
  }
  if (!is_known_dtype(dtype)) {
    info.reason = "dtype = " + std::to_string(dtype) + " is unknown: use " + text::known_dtypes();
    return info;
  }
  const auto t = flashlab_dtype(dtype);
  info.reason = text::unsupported_reason(*info.kernel, d, t);
  info.supported = info.reason.empty();
  info.config = kernel_config(info.kernel->id, d, t);
  return info;
}

}  // namespace flashlab::gpu

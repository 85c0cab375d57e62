// Figures measured on the lent H200 that the lessons quote, each written once here with the
// run it comes from (bench/RESULTS.md and bench/gpu/NOTES.md describe the runs in full). A
// lesson prints them as measured, with their source; what it derives from them it computes.
// When a new run replaces a figure, it is replaced here and nowhere else.
#pragma once

#include "flashlab/sim/problem.hpp"

#include <array>
#include <stdexcept>
#include <string_view>

namespace flashlab::app::measured {

// Where and how a figure was measured.
struct Source {
  std::string_view run;    // the run's entry in bench/RESULTS.md or bench/gpu/NOTES.md
  std::string_view shape;  // the problem it was measured on
  std::string_view tool;
};

// Nsight Compute's scheduler statistics on fa2 (03_fa2.cu v4; the kernel restructured since
// computes the same, with the same tiles and the same compiler report: 255 registers, no
// spills without dropout).
struct WarpState {
  Source source;
  double no_eligible_share;  // share of cycles in which a scheduler had no warp ready to issue
};
inline constexpr WarpState kFa2WarpState{
    {"bench/RESULTS.md, run of 2026-11-29 (fa2 v4); bench/gpu/NOTES.md, \"Where v4 stands\"",
     "B = 1, H = 16, N = 8192, d = 128, bf16, non-causal", "Nsight Compute, scheduler section"},
    0.59};

// The row of `rows` whose `key` is `value` (a lesson quotes only rows a table has).
template <class Row, std::size_t N, class Key>
constexpr const Row& row_where(const std::array<Row, N>& rows, Key Row::*key, std::int64_t value) {
  for (const Row& r : rows)
    if (r.*key == value) return r;
  throw std::logic_error("a measured table has no row at this value");
}

// torch's decode on the same GPU, as docs/ANCHORS.md has it: scaled_dot_product_attention
// through its flash and cuDNN backends, one query token against a cache of L keys. TB/s = bytes
// of K and V read / time.
struct AnchorDecode {
  std::int64_t length;  // L
  double flash, cudnn;
};
inline constexpr Source kAnchorDecodeSource{"docs/ANCHORS.md, Decode (2026-11-29)",
                                            "B = 8, 32 query heads over 8 KV heads, d = 128, bf16",
                                            "triton.testing.do_bench medians"};
inline constexpr std::array kAnchorDecode = {AnchorDecode{4096, 2.55, 2.71},
                                             AnchorDecode{32768, 4.10, 4.14},
                                             AnchorDecode{131072, 4.09, 4.42}};
// The row of kAnchorDecode at cache length L.
constexpr const AnchorDecode& anchor_decode(std::int64_t length) {
  return row_where(kAnchorDecode, &AnchorDecode::length, length);
}

// The split-KV decode kernel (05_decode_split_kv.cu, v3: the tensor cores, a cp.async ring;
// the combine as a dependent launch) on a contiguous cache and on paged ones, pages placed
// through a shuffled block table. TB/s = bytes of K and V read / time. (v2, which copied K
// and V into registers, lost 6 to 13% to pages of 64 and 256 keys.)
struct DecodePaged {
  int batch;
  int cache;  // keys per sequence, L
  double contiguous, paged64, paged256;
};
inline constexpr Source kDecodePagedSource{
    "bench/RESULTS.md, run of 2026-12-02 (second), Decode in turns "
    "(results/2026-12-02-h200-decode-turns.csv)",
    "bf16, d = 128, 32 query heads over 8 KV heads, N_q = 1", "triton.testing.do_bench medians"};
inline constexpr std::array kDecodePaged = {
    DecodePaged{8, 4096, 2.683, 2.675, 2.680},
    DecodePaged{8, 32768, 4.171, 4.102, 4.127},
    DecodePaged{8, 131072, 4.423, 4.369, 4.381},
};
// The contiguous cache's TB/s at cache length L, from kDecodePaged.
constexpr double decode_contiguous(std::int64_t length) {
  return row_where(kDecodePaged, &DecodePaged::cache, length).contiguous;
}

// Where the decode's split blocks end: the split kernel built with a block log (each block's
// SM, its start and the end of its last tile, %globaltimer), one call at L = 131072 after
// do_bench's 256 MB write, 256 blocks of equal work (4 splits), all started within 0.1 us.
// The ends, in us from the first start, and the share of all the blocks' work done when the
// first of them ended (each block's progress read off the ends of its fifths of tiles).
struct BlockEnds {
  Source source;
  double first, p10, median, p90, last;  // us
  double done_at_first;                  // share of the work done when the first block ended
  int tpc_pairs_alike, tpc_pairs;        // SM pairs (2k, 2k + 1) whose blocks ended within 10 us
};
inline constexpr BlockEnds kDecodeBlockEnds{
    {"bench/RESULTS.md, run of 2026-12-03, fifth; bench/gpu/NOTES.md, \"Where decode's split "
     "blocks end\" (results/2026-12-03-h200-decode-block-log.csv, L = 131072, call 0)",
     "B = 8, 32 query heads over 8 KV heads, d = 128, bf16, L = 131072, 4 splits",
     "each block's %smid and %globaltimer at its start and its last tile's end"},
    753.3, 765.1, 897.2, 933.3, 947.2, 0.821, 63, 66};

// The same shape with the split count forced, in turns with cuDNN: TB/s of K and V.
struct SplitCountTime {
  int splits;
  bool automatic;  // the library's own choice at this shape
  double tbps;
};
inline constexpr Source kDecodeManySplitsSource{
    "bench/RESULTS.md, run of 2026-12-03, fifth (results/2026-12-03-h200-decode-pipeline-"
    "variants.txt, third call)",
    "B = 8, 32 query heads over 8 KV heads, d = 128, bf16, L = 131072",
    "bench/gpu/decode_splits.py, triton.testing.do_bench medians in balanced turns"};
inline constexpr std::array kDecodeManySplits = {
    SplitCountTime{2, false, 4.47}, SplitCountTime{4, true, 4.45},
    SplitCountTime{16, false, 4.44}, SplitCountTime{32, false, 4.41},
    SplitCountTime{64, false, 4.40}};
inline constexpr double kDecodeManySplitsCudnn = 4.48;

// The queue grid (05_decode_queue.cu) at the same shape, piece counts forced, in turns with the
// split grid at its automatic count and cuDNN: TB/s of K and V.
struct PieceCountTime {
  int pieces;
  bool automatic;  // decode::auto_pieces at this length
  double tbps;
};
inline constexpr Source kDecodeQueueSource{
    "bench/RESULTS.md, run of 2026-12-03, sixth (results/2026-12-03-h200-decode-queue-first.txt; "
    "the equal pieces: -decode-queue-variants.txt)",
    "B = 8, 32 query heads over 8 KV heads, d = 128, bf16, L = 131072",
    "bench/gpu/decode_splits.py --queue-pieces, triton.testing.do_bench medians in balanced turns"};
inline constexpr std::array kDecodeQueue = {
    PieceCountTime{8, false, 3.95}, PieceCountTime{16, false, 4.39},
    PieceCountTime{22, true, 4.42}, PieceCountTime{32, false, 4.43},
    PieceCountTime{64, false, 4.39}};
inline constexpr double kDecodeQueueSplitGrid = 4.45, kDecodeQueueCudnn = 4.47;
inline constexpr std::int64_t kDecodeQueueLength = 131072;  // L, as the source's shape says
// Where the splits' states are merged: the combine kernel (05_decode_combine.cu, launched as a
// programmatic dependent of the split kernel), against a build in which the last split block
// of each (sequence, KV head) to end merges them (a counter a group, a fence, no combine
// kernel; the branch decode-last-split-merges). TB/s of K and V after a clean flush, two runs
// each, in turns.
struct MergeWhere {
  std::int64_t length;
  double combine_kernel[2], last_block[2];
};
inline constexpr Source kDecodeMergeWhereSource{
    "bench/RESULTS.md, run of 2026-12-03, seventh "
    "(results/2026-12-03-h200-zeroed-words-and-fused-combine.txt: main, fused)",
    "B = 8, 32 query heads over 8 KV heads, d = 128, bf16",
    "bench/gpu/decode_splits.py --other-lib, events around each call after a clean flush"};
inline constexpr std::array kDecodeMergeWhere = {MergeWhere{4096, {3.32, 3.32}, {3.12, 3.16}},
                                                 MergeWhere{32768, {4.35, 4.35}, {4.29, 4.29}},
                                                 MergeWhere{131072, {4.50, 4.50}, {4.47, 4.48}}};

// One split ends its rows in the split kernel (O = U / l and LSE there, no combine launched)
// against the build before, which sent its one state through the combine; B = 32 and 64 take
// one split by the rule. TB/s of K and V, in turns.
struct LoneSplit {
  std::int64_t batch, length;
  double ends_rows, through_combine;
};
inline constexpr Source kDecodeLoneSplitSource{
    "bench/RESULTS.md, run of 2026-12-04, tenth "
    "(results/2026-12-04-h200-decode-lone-split-b32-b64.txt: auto, base)",
    "32 query heads over 8 KV heads, d = 128, bf16, one split",
    "bench/gpu/decode_splits.py --other-lib base=..., triton's do_bench"};
inline constexpr std::array kDecodeLoneSplit = {
    LoneSplit{32, 4096, 3.96, 3.90},  LoneSplit{32, 8192, 4.31, 4.27},
    LoneSplit{32, 16384, 4.48, 4.46}, LoneSplit{32, 32768, 4.57, 4.56},
    LoneSplit{64, 4096, 4.24, 4.17},  LoneSplit{64, 8192, 4.44, 4.40},
    LoneSplit{64, 16384, 4.51, 4.51}, LoneSplit{64, 32768, 4.61, 4.59}};
// B = 1: 16 splits (the combine loads 16 states at once: one round trip a row; 128 blocks,
// one an SM) against 32 (two blocks an SM, two round trips a row), beside cuDNN.
struct CombineGroups {
  std::int64_t length;
  double one_group, two_groups, cudnn;
};
inline constexpr Source kDecodeCombineGroupsSource{
    "bench/RESULTS.md, run of 2026-12-04, tenth "
    "(results/2026-12-04-h200-decode-one-group-rule-b1.txt: auto, base, cudnn)",
    "B = 1, 32 query heads over 8 KV heads, d = 128, bf16",
    "bench/gpu/decode_splits.py --other-lib base=..., triton's do_bench"};
inline constexpr std::array kDecodeCombineGroups = {
    CombineGroups{16384, 2.05, 1.95, 2.04}, CombineGroups{32768, 2.67, 2.61, 2.66},
    CombineGroups{65536, 3.33, 3.29, 3.35}, CombineGroups{131072, 3.86, 3.79, 3.83}};

// The default backward's DRAM reads, summed over its three kernels (Nsight Compute, which
// empties the L2 before each), set beside the floor from a cold L2 in lesson 6: one sequence,
// causal, up to and past the point where the L2 stops holding a query tile between visits.
// Beside each, the grid model's prediction of the same (sim::predicted_dram on the H200
// profile: the main kernel's grid through the L2's partitions and hashed sets, the floor for
// the pre- and post-kernels), stored because the longest rows take the model minutes:
// bench/simulator/backward_grid_vs_measured.py's read_grid
// (results/2026-12-04-backward-grid-vs-h200.csv); a test runs the short rows again.
struct BackwardDramRead {
  std::int64_t heads_q, heads_kv, n;
  double read_bytes;  // dram__bytes_read.sum
  double grid_bytes;  // the grid model's
};
inline constexpr Source kBackwardDramReadSource{
    "bench/RESULTS.md, run of 2026-12-04, eleventh "
    "(results/2026-12-04-h200-compare-pass-sweep-backward-{causal,gqa,long}.csv: "
    "dram_read_measured)",
    "one sequence, bf16, d = 128, causal", "flashlab compare --pass backward --sweep, ncu"};
inline constexpr std::array kBackwardDramRead = {
    BackwardDramRead{16, 16, 4096, 168584960, 168303488},
    BackwardDramRead{16, 16, 16384, 673868288, 673587712},
    BackwardDramRead{16, 16, 32768, 1347037696, 1346703360},
    BackwardDramRead{16, 16, 65536, 3767886336, 3619703424},
    BackwardDramRead{16, 4, 4096, 149005312, 145379968},
    BackwardDramRead{16, 4, 8192, 308751104, 313914752},
    BackwardDramRead{16, 4, 16384, 1278443008, 1245193216}};

// A build whose queue cuts every sequence into 4 equal pieces (256 items on 264 blocks: one
// item a block, the split grid's very work) against the split grid, in the same turns.
inline constexpr double kDecodeQueueEqualPieces = 4.43, kDecodeQueueEqualSplitGrid = 4.45;

// The output tiles cuBLAS chose for the naive kernel's two GEMMs (01_naive.cu,
// cublasGemmBatchedEx) on the H200, read from the kernel names Nsight Compute prints:
// nvjet_sm90_tss_256x128_... tiles cuBLAS's (M, N) = (columns, rows) of the row-major output
// 256 x 128. A GEMM reads its left operand once per column of output tiles and its right one
// once per row, so the tiles set the naive kernel's reads into the SMs (Q 16 and K 32 times
// at N = 4096). cuBLAS picks them per shape (N, d, heads as the batch count, dtype), so only
// the shapes read on the device are known; the mirror takes them from here
// (sim::Problem::score_gemm, output_gemm), for a shape not read from the nearest one read
// with the same d (app::cublas_tiles), and says so.
struct CublasTiles {
  int n, d, heads;       // bf16, N_q = N_k = n, either mask
  sim::GemmTile score;   // S = Q K^T, output (N, N)
  sim::GemmTile output;  // O = P V, output (N, d)
};
inline constexpr Source kCublasTilesSource{
    "bench/results/2026-12-03-h200-naive-kernels.csv, 2026-12-05-h200-naive-kernels-d64.csv and "
    "-heldout-*.csv (docs/IO-LEVELS.md, \"The naive kernel: cuBLAS's tiles\")",
    "bf16, d = 128 and 64, 1 to 16 heads", "Nsight Compute kernel names (nvjet_sm90_..._AxB_...)"};
// Each entry: N, d, heads; S's tile {rows, columns}, O's. A name's AxB is {.m = B, .n = A}.
// 16 heads at N = 16384 run as calls of 5, 5, 5 and 1 (the S and P of 5 fill the naive
// kernel's 8 GiB workspace): cuBLAS tiles O 128x160 in the calls of 5 and 128x128 in the last,
// and the entry holds the first (O's reads 1.9% under the measured, the launches' 0.4%).
inline constexpr std::array kCublasTiles = {
    CublasTiles{1024, 128, 1, {64, 128}, {24, 64}},       // tss_128x64, tst_64x24
    CublasTiles{2048, 128, 1, {128, 256}, {48, 64}},      // tss_256x128, tst_64x48
    CublasTiles{4096, 128, 1, {128, 256}, {64, 64}},      // tss_256x128, tst_64x64
    CublasTiles{8192, 128, 1, {128, 256}, {128, 64}},     // tss_256x128, tst_64x128
    CublasTiles{16384, 128, 1, {128, 256}, {128, 128}},   // tss_256x128, tst_128x128
    CublasTiles{32768, 128, 1, {192, 192}, {256, 128}},   // tss_192x192, tst_128x256
    CublasTiles{1024, 128, 16, {128, 256}, {128, 128}},   // tss_256x128, tst_128x128
    CublasTiles{2048, 128, 16, {128, 256}, {256, 128}},   // tss_256x128, tst_128x256
    CublasTiles{4096, 128, 16, {128, 256}, {256, 128}},   // tss_256x128, tst_128x256
    CublasTiles{8192, 128, 16, {128, 256}, {256, 128}},   // tss_256x128, tst_128x256
    CublasTiles{16384, 128, 16, {128, 256}, {160, 128}},  // tss_256x128, tst_128x160 (above)
    // d = 64 (bench/results/2026-12-05-h200-naive-kernels-d64.csv, naive_launches.py)
    CublasTiles{1024, 64, 1, {64, 128}, {8, 64}},       // tss_128x64, tst_64x8
    CublasTiles{2048, 64, 1, {128, 256}, {24, 64}},     // tss_256x128, tst_64x24
    CublasTiles{4096, 64, 1, {128, 256}, {64, 32}},     // tss_256x128, tst_32x64
    CublasTiles{8192, 64, 1, {128, 256}, {80, 64}},     // tss_256x128, tst_64x80
    CublasTiles{16384, 64, 1, {128, 256}, {128, 64}},   // tss_256x128, tst_64x128
    CublasTiles{1024, 64, 16, {128, 256}, {128, 64}},   // tss_256x128, tst_64x128
    CublasTiles{2048, 64, 16, {128, 256}, {256, 64}},   // tss_256x128, tst_64x256
    CublasTiles{4096, 64, 16, {128, 256}, {512, 64}},   // tss_256x128, tst_64x512
    CublasTiles{8192, 64, 16, {128, 256}, {512, 64}},   // tss_256x128, tst_64x512
    CublasTiles{16384, 64, 16, {128, 256}, {160, 64}},  // tss_256x128, tst_64x160 (calls of 5)
    // Shapes first predicted from their nearest neighbours above, then read (2026-12-05,
    // -naive-kernels-heldout-{d128,d64,heads}.csv). At N = 12288 16 heads run as calls of 9
    // and 7, the second with another O tile (d = 128: 128x256; d = 64: 64x384).
    CublasTiles{3072, 128, 1, {192, 192}, {64, 64}},      // tss_192x192, tst_64x64
    CublasTiles{6144, 128, 1, {192, 192}, {128, 64}},     // tss_192x192, tst_64x128
    CublasTiles{12288, 128, 1, {128, 256}, {192, 64}},    // tss_256x128, tst_64x192
    CublasTiles{4096, 128, 4, {128, 256}, {128, 128}},    // tss_256x128, tst_128x128
    CublasTiles{4096, 128, 8, {128, 256}, {256, 128}},    // tss_256x128, tst_128x256
    CublasTiles{3072, 128, 16, {128, 256}, {192, 128}},   // tss_256x128, tst_128x192
    CublasTiles{6144, 128, 16, {192, 192}, {256, 128}},   // tss_192x192, tst_128x256
    CublasTiles{12288, 128, 16, {192, 192}, {192, 128}},  // tss_192x192, tst_128x192
    CublasTiles{3072, 64, 1, {192, 192}, {64, 32}},       // tss_192x192, tst_32x64
    CublasTiles{6144, 64, 1, {192, 192}, {64, 64}},       // tss_192x192, tst_64x64
    CublasTiles{12288, 64, 1, {128, 256}, {96, 64}},      // tss_256x128, tst_64x96
    CublasTiles{4096, 64, 4, {128, 256}, {128, 64}},      // tss_256x128, tst_64x128
    CublasTiles{4096, 64, 8, {128, 256}, {256, 64}},      // tss_256x128, tst_64x256
    CublasTiles{3072, 64, 16, {128, 256}, {384, 64}},     // tss_256x128, tst_64x384
    CublasTiles{6144, 64, 16, {192, 192}, {384, 64}},     // tss_192x192, tst_64x384
    CublasTiles{12288, 64, 16, {192, 192}, {512, 64}},    // tss_192x192, tst_64x512
    // N = 2048 and 8192 with 4 and 8 heads (-heldout-heads2.csv)
    CublasTiles{2048, 128, 4, {128, 256}, {128, 64}},   // tss_256x128, tst_64x128
    CublasTiles{8192, 128, 4, {128, 256}, {256, 128}},  // tss_256x128, tst_128x256
    CublasTiles{2048, 128, 8, {128, 256}, {128, 128}},  // tss_256x128, tst_128x128
    CublasTiles{8192, 128, 8, {128, 256}, {256, 128}},  // tss_256x128, tst_128x256
    CublasTiles{2048, 64, 4, {128, 256}, {80, 64}},     // tss_256x128, tst_64x80
    CublasTiles{8192, 64, 4, {128, 256}, {256, 64}},    // tss_256x128, tst_64x256
    CublasTiles{2048, 64, 8, {128, 256}, {128, 64}},    // tss_256x128, tst_64x128
    CublasTiles{8192, 64, 8, {128, 256}, {512, 64}},    // tss_256x128, tst_64x512
};

// Bytes a kernel's launches moved, as a ratio to a count the lessons compute (each says
// which): the figures lesson 5 quotes beside its predictions.
struct BytesRatio {
  Source source;
  double ratio;
};
// The scalar kernel with plain loads (the library's until 2026-12-05, bench_scalar_block_log's
// build since), at one head, N = 16384, d = 128: bytes into the SMs over its blocks' loads,
// every block's every tile (1,111,490,944 of 2,151,677,952): its L1 sharing.
inline constexpr BytesRatio kScalarSmReadN16384{
    {"bench/RESULTS.md, the compare sweep of 2026-12-01 (compare-sweep-h1.csv)",
     "scalar, one head, N = 16384, d = 128, bf16", "Nsight Compute, l1tex__m_xbar2l1tex_read_bytes"},
    0.5166};
// A step of the scalar kernel (02_tiled_scalar.cu: loads it waits for, their latency exposed) whose
// K and V tiles the L2 held, as a share of the time of one whose tiles came from DRAM. In
// its block logs (16 heads, each block's SM, start and end) a head's blocks end together
// though they start apart: at N = 8192 the 128 blocks of head 10 ended within 20 us, and the
// last of them had started 18.4% of the head's span (first start to last end) after the
// first. A block behind its head's others reads the tiles they brought into the L2, so its
// steps take at most 1 - 0.184 of theirs; the grid model takes that bound
// (sim::GridProblem::l2_step_share, the catch_up schedule; docs/IO-LEVELS.md, "The scalar
// kernel's heads catch up"). `scalar_l1_vs_block_log` computes it from the logs.
struct StepShare {
  Source source;
  double l2_step_share;
};
inline constexpr StepShare kScalarL2StepShare{
    {"bench/gpu/NOTES.md, \"The scalar kernel's heads catch up\" "
     "(results/2026-12-03-h200-scalar-block-log-ncu.csv)",
     "scalar, 16 heads, N = 4096 to 16384, d = 128, bf16",
     "%smid and %globaltimer at each block's start and end"},
    0.816};

// The scalar kernel with plain loads at 16 heads, N = 8192, d = 128: bytes into the SMs over
// its blocks' loads (8,261,519,040 of 8,623,489,024): what its L1s shared where blocks of a
// head met on an SM. Two runs before it read 0.965 and 0.970 (compare-sweep-h16.csv and
// -r2.csv of 2026-12-01).
inline constexpr BytesRatio kScalarSmReadH16N8192{
    {"bench/RESULTS.md, the compare sweep of 2026-12-03 (compare-sweep-h16.csv)",
     "scalar, 16 heads, N = 8192, d = 128, bf16", "Nsight Compute, l1tex__m_xbar2l1tex_read_bytes"},
    0.9580};
// The scalar kernel with its loads cached in the L2 only (ld.global.cg, 02_tiled_scalar.cu):
// bytes into the SMs over its mirror's (every block's every tile), lowest and highest over the
// run's shapes (1 and 16 heads, N = 4096, 8192, 16384, d = 128, both masks; 16 heads, N =
// 2048 and 8192, d = 64, both masks), and its speed over the plain loads' build, timed in turns
// (bench.py --baseline-lib, N = 2048 and 8192, both masks), lowest and highest per d.
struct LoadsPastTheL1 {
  Source source;
  int shapes;
  double sm_read_low, sm_read_high;
  double speed_d128_low, speed_d128_high, speed_d64_low, speed_d64_high;
};
inline constexpr LoadsPastTheL1 kScalarLoadsPastTheL1{
    .source =
        {"bench/RESULTS.md, 2026-12-05, night (an H100: results/h100/2026-12-05-h100-scalar-cg-*)",
         "scalar, bf16, 1 and 16 heads", "flashlab compare (Nsight Compute); bench.py, do_bench"},
    .shapes = 16,
    .sm_read_low = 1.0,
    .sm_read_high = 1.0,
    .speed_d128_low = 0.980,
    .speed_d128_high = 0.986,
    .speed_d64_low = 0.879,
    .speed_d64_high = 0.889};
// The naive kernel at one head, N = 4096, d = 128: DRAM read (103,866,624 bytes) over its
// mirror's prediction with each launch measured cold: 3 N d 2 + 4 N^2 + 2 N^2 = 103,809,024
// bytes (Q, K, V, then S and P once: the softmax's 1056 rows in flight, half on each side,
// and their P fill 24.8 of the L2's 60 MiB, so its second and third passes hit).
inline constexpr BytesRatio kNaiveDramReadN4096{
    {"bench/RESULTS.md, the compare sweep of 2026-12-01 (compare-sweep-h1.csv)",
     "naive, one head, N = 4096, d = 128, bf16", "Nsight Compute, dram__bytes_read"},
    1.001};

// Hopper's L2 Request Coalescer on fa2's reads, one call each (docs/IO-LEVELS.md, "What the
// L2 slices count"): the read sectors it sent to the SMs and those it asked of the L2 slices.
// Their ratio, how many SM reads each slice read served, is what sets the slices' bytes
// below the SMs'.
struct Coalescing {
  int heads;
  int n;
  double to_sms, from_slices;  // 32-byte sectors
};
inline constexpr Source kFa2CoalescingSource{
    "bench/gpu/NOTES.md, seventh run (results/2026-12-01-h200-levels-lrc.csv)",
    "fa2, B = 1, d = 128, bf16, non-causal",
    "Nsight Compute, lrc__xbar2gpc_sectors_op_read and lrc__lts2lrc_sectors_op_read"};
inline constexpr std::array kFa2Coalescing = {
    Coalescing{1, 4096, 2140528, 1241632},
    Coalescing{1, 16384, 33695942, 16770166},
    Coalescing{1, 32768, 134491260, 125740420},
    Coalescing{16, 4096, 34089078, 29571718},
};

// What a call's place in the timing order did (bench.py timed the implementations of a shape
// one after the other until 2026-12-02): the same fa3 kernel on the same grid, timed first
// and then second or fourth of five, at 24 shapes in three runs. The later one took this many
// times the first's time: median and largest.
struct OrderSpread {
  Source source;
  double median, largest;
};
inline constexpr OrderSpread kTimedLater{
    {"bench/gpu/NOTES.md, \"fa3's work queue, measured\" (results/2026-12-02-h200-fa3-grids.csv)",
     "fa3 against fa3-persistent (N <= 8192) and fa3-per-tile (N = 16384), d = 64 and 128, "
     "causal and not",
     "triton.testing.do_bench medians"},
    1.008,
    1.083};

// fa3 at d = 64 with its consumers computing only the KV tiles their own rows see, over the
// same kernel before that change (4ce63fc), timed in turns in one process: N = 1024, the
// first and second run.
struct SkipGain {
  Source source;
  double causal[2], none[2];  // TFLOP/s over 4ce63fc's, runs 1 and 2
};
inline constexpr SkipGain kFa3SkipUnseenN1024{
    {"bench/RESULTS.md, run of 2026-12-02, sixth; bench/gpu/NOTES.md, \"Consumers that skip the "
     "tiles their rows do not see, measured\" (results/2026-12-02-h200-fa3-skip-unseen-d64.csv, "
     "-repeat.csv)",
     "B = 16, H = 32, N = 1024, d = 64, bf16", "bench.py --baseline-lib, triton.testing.do_bench"},
    {1.158, 1.160},
    {1.063, 1.057}};

// fa3 at d = 64 with the partly empty query tile a head's first under the causal mask (the
// tiles started 128 rows before row 0, so that the busiest consumer's share of a head falls
// from 96 (64, 128) tile-slots to 81; the branch fa3-lead-first), over main's kernel without
// it, timed in turns in one process: N = 1024, one run. Without the mask nothing starts
// elsewhere, so `none` is the spread of two builds of the same work.
struct LeadGain {
  Source source;
  double causal, none;  // TFLOP/s over main's
};
inline constexpr LeadGain kFa3LeadFirstN1024{
    {"bench/RESULTS.md, run of 2026-12-02, seventh; bench/gpu/NOTES.md, \"The partly empty "
     "query tile first\" (results/2026-12-02-h200-fa3-lead-first-d64.csv)",
     "B = 16, H = 32, N = 1024, d = 64, bf16", "bench.py --baseline-lib, triton.testing.do_bench"},
    0.994,
    0.970};

}  // namespace flashlab::app::measured

// The kernels' description (kernel_info.hpp) on its own: it needs no GPU and no CUDA, so
// these tests run on every machine. The kernels themselves static_assert that they launch
// what it says (02_tiled_scalar.cu, 03_fa2.cu); here the table is checked against itself,
// against the hardware it is built for, and for the messages it gives.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "flashlab/gpu/kernel_info.hpp"

#include "random_inputs.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>

namespace flashlab::gpu {
namespace {

// An H200 SM has 228 KiB of shared memory; a block may take at most 227 KiB of it, and the
// runtime reserves 1 KiB per resident block (CUDA C Programming Guide, compute capability 9.0).
constexpr int64_t kSmSramBytes = 228 * 1024;
constexpr int64_t kBlockSramBytes = 227 * 1024;
constexpr int64_t kReservedPerBlock = 1024;
constexpr int kMaxThreadsPerBlock = 1024;

// A d that no kernel lists, drawn fresh: in [1, 4096] and not 64 or 128.
int64_t unlisted_d(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(1, 4096);
  int64_t d = 64;
  while (d == 64 || d == 128) d = pick(rng);
  return d;
}

TEST_CASE("the list of kernels: one record per flashlab_kernel, found by id and by name") {
  std::set<int> ids;
  std::set<std::string_view> names;
  for (const KernelRecord& k : kKernels) {
    ids.insert(k.id);
    names.insert(k.name);
    CHECK(find_kernel(k.id) == &k);
    CHECK(find_kernel(k.name) == &k);
    CHECK(!k.summary.empty());
    CHECK(k.head_dims.count <= FLASHLAB_MAX_HEAD_DIMS);
  }
  CHECK(ids == std::set<int>{FLASHLAB_KERNEL_NAIVE, FLASHLAB_KERNEL_SCALAR, FLASHLAB_KERNEL_FA2,
                            FLASHLAB_KERNEL_FA3});
  CHECK(names.size() == kKernels.size());
  CHECK(find_kernel("fa3")->id == FLASHLAB_KERNEL_FA3);
  CHECK(find_kernel("fa2")->id == FLASHLAB_KERNEL_FA2);
  CHECK(find_kernel("scalar")->id == FLASHLAB_KERNEL_SCALAR);
  CHECK(find_kernel("naive")->id == FLASHLAB_KERNEL_NAIVE);
  CHECK(find_kernel("flash") == nullptr);
  CHECK(find_kernel(int32_t{4}) == nullptr);
  CHECK(find_kernel(int32_t{-1}) == nullptr);
}

TEST_CASE("every supported (kernel, d, dtype) fits the hardware it is built for") {
  for (const KernelRecord& k : kKernels)
    for (flashlab_dtype dtype : kDtypes) {
      const int64_t dims[] = {64, 128};
      for (int64_t d : dims) {
        const KernelInfo info = kernel_info(k.id, d, dtype);
        INFO(k.name, " d = ", d, " ", dtype_name(dtype));
        CHECK(info.supported == (k.head_dims.contains(d) && k.dtypes.contains(dtype)));
        if (!info.supported) continue;
        const KernelConfig& c = info.config;
        CHECK(info.reason.empty());
        CHECK((c.Br == 0) == (c.Bc == 0));  // tiles in both directions, or none
        CHECK(c.threads % kWarpSize == 0);
        CHECK(c.threads <= kMaxThreadsPerBlock);
        CHECK(c.sram_bytes > 0);
        CHECK(c.sram_bytes <= kBlockSramBytes);
        CHECK(c.blocks_per_sm * (c.sram_bytes + kReservedPerBlock) <= kSmSramBytes);
        CHECK(c.pointer_align_bytes % dtype_bytes(dtype) == 0);
        CHECK(c.stride_align_elements * dtype_bytes(dtype) <= c.pointer_align_bytes);
        CHECK(c.kv_passes == 1);
        CHECK(c.s.dtype == FLASHLAB_FP32);  // every kernel accumulates scores in fp32
        CHECK((c.s.level == FLASHLAB_MEMORY_HBM) == (c.s_hbm_reads > 0));
      }
    }
}

TEST_CASE("the backward's kernels fit the hardware, and the workspace is its formula") {
  for (flashlab_dtype dtype : {FLASHLAB_FP16, FLASHLAB_BF16})
    for (int64_t d : {64, 128}) {
      INFO("fa2 backward d = ", d, " ", dtype_name(dtype));
      CHECK(fa2_backward::kHeadDims.contains(d));
      CHECK(fa2_backward::kDtypes.contains(dtype));
      for (const KernelConfig& c :
           {fa2_backward::config(d, dtype), fa2_backward::dq_config(d, dtype)}) {
        CHECK(c.threads % kWarpSize == 0);
        CHECK(c.Br % 16 == 0);  // m16 tiles of rows, k16 slices of the dQ product
        CHECK(c.Bc % 16 == 0);
        CHECK(c.sram_bytes <= kBlockSramBytes);
        CHECK(c.blocks_per_sm * (c.sram_bytes + kReservedPerBlock) <= kSmSramBytes);
        CHECK(c.stride_align_elements * dtype_bytes(dtype) == c.pointer_align_bytes);
      }
    }
  CHECK(!fa2_backward::kHeadDims.contains(96));
  CHECK(!fa2_backward::kDtypes.contains(FLASHLAB_FP32));
  // B = 2, Hq = 3, N_q = 5, d = 64: D is 30 floats = 120 bytes, padded to 256; the
  // accumulator 30 * 64 floats = 7680 bytes.
  CHECK(fa2_backward::workspace_bytes(2, 3, 5, 64, /*deterministic=*/false) == 256 + 7680);
  CHECK(fa2_backward::workspace_bytes(2, 3, 5, 64, /*deterministic=*/true) == 256);
  CHECK(fa2_backward::dq_accum_offset_bytes(2, 3, 5) % fa2_backward::kWorkspaceAlignBytes == 0);
  // Linear in N_q, never N_q * N_k: no N^2 memory.
  CHECK(fa2_backward::workspace_bytes(1, 1, 2 * 4096, 128, false) ==
        2 * fa2_backward::workspace_bytes(1, 1, 4096, 128, false));
}

TEST_CASE("the backward's v3: which calls it takes, and its tiles, threads and SRAM") {
  // The rule: the default mode without dropout, with rows TMA can describe; v2 otherwise.
  CHECK(fa3_backward::takes(/*deterministic=*/false, /*dropout=*/false, /*row_stride_zero=*/false));
  CHECK(!fa3_backward::takes(true, false, false));
  CHECK(!fa3_backward::takes(false, true, false));
  CHECK(!fa3_backward::takes(false, false, true));
  CHECK(!fa3_backward::takes(true, true, true));
  for (flashlab_dtype dtype : {FLASHLAB_FP16, FLASHLAB_BF16})
    for (int64_t d : {64, 128}) {
      INFO("fa3 backward d = ", d, " ", dtype_name(dtype));
      const KernelConfig c = fa3_backward::config(d, dtype);
      // Two warpgroups of 128 threads, each owning wgmma's M = 64 keys; 64 query rows a step.
      CHECK(c.threads == 256);
      CHECK(c.Bc == 128);
      CHECK(c.Br == 64);
      CHECK(c.blocks_per_sm == 1);
      // Alignment slack and barriers (1024 + 1024 bytes), sK, sV (128 x d), sQ, sdO two
      // buffers of (64 x d), sdS^T (128 x 64), 2 bytes each; sL, sD two buffers of 64 floats;
      // at d = 64 only, dQ's exchange: two warpgroups' (64 x 32) fp32 halves.
      const int64_t exchange = d == 64 ? 4 * 2 * 64 * 32 : 0;
      CHECK(c.sram_bytes ==
            2048 + 2 * (2 * 128 * d + 4 * 64 * d + 128 * 64) + 4 * 4 * 64 + exchange);
      CHECK(c.sram_bytes <= kBlockSramBytes);
      CHECK(c.blocks_per_sm * (c.sram_bytes + kReservedPerBlock) <= kSmSramBytes);
      CHECK(c.stride_align_elements * dtype_bytes(dtype) == c.pointer_align_bytes);
    }
  // d = 128, bf16: 147 KiB, the figure kernel_info.hpp's comment gives.
  CHECK(fa3_backward::sram_bytes(128, FLASHLAB_BF16) == 147 * 1024);
  CHECK(fa3_backward::sram_bytes(64, FLASHLAB_BF16) == 99 * 1024);  // 83 KiB + dQ's exchange
}

// The numbers the kernels were written with (and measured with, bench/gpu/NOTES.md).
TEST_CASE("the ladder's configurations") {
  const KernelConfig fa2_128 = kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16);
  CHECK(fa2_128.Br == 128);
  CHECK(fa2_128.Bc == 64);
  CHECK(fa2_128.threads == 128);
  CHECK(fa2_128.blocks_per_sm == 2);
  CHECK(fa2_128.sram_bytes == 2 * (128 * 128 + 2 * 2 * 64 * 128));  // sQ, 2 x (sK, sV)
  CHECK(fa2_128.w.level == FLASHLAB_MEMORY_REGISTERS);
  CHECK(fa2_128.w.dtype == FLASHLAB_BF16);
  CHECK(fa2_128.pointer_align_bytes == 16);
  CHECK(fa2_128.stride_align_elements == 8);
  const KernelConfig fa2_64 = kernel_config(FLASHLAB_KERNEL_FA2, 64, FLASHLAB_FP16);
  CHECK(fa2_64.Bc == 128);
  CHECK(fa2_64.sram_bytes == 2 * (128 * 64 + 2 * 2 * 128 * 64));
  CHECK(fa2_64.w.dtype == FLASHLAB_FP16);

  const KernelConfig scalar_64 = kernel_config(FLASHLAB_KERNEL_SCALAR, 64, FLASHLAB_BF16);
  CHECK(scalar_64.Br == 64);
  CHECK(scalar_64.Bc == 32);
  CHECK(scalar_64.threads == 64);
  CHECK(scalar_64.sram_bytes == 4 * (64 * 65 + 2 * 32 * 64 + 64 * 33));  // fp32 sQ, sK, sV, sS
  CHECK(scalar_64.s.level == FLASHLAB_MEMORY_SRAM);
  CHECK(scalar_64.pointer_align_bytes == 2);

  // fa3: two consumer warpgroups of 64 rows at d = 128 (three at d = 64), a producer
  // warpgroup, 128-key tiles, and 1024 bytes of alignment slack + sQ + 2 stages x (sK, sV) +
  // 1024 bytes of barriers + sO for the TMA stores of O + a second sQ; at 3 stages of
  // d = 128 no room is left for sO (O is stored from the registers) nor a second sQ, at
  // d = 64 there is.
  const KernelConfig fa3_128 = kernel_config(FLASHLAB_KERNEL_FA3, 128, FLASHLAB_BF16);
  CHECK(fa3_128.Br == 128);
  CHECK(fa3_128.Bc == 128);
  CHECK(fa3_128.threads == 384);
  CHECK(fa3_128.blocks_per_sm == 1);
  // sQ twice (the second Q buffer), sK and sV twice each, sO: 7 tiles of 32 KiB.
  CHECK(fa3_128.sram_bytes ==
        1024 + 2 * (128 * 128 + 2 * 2 * 128 * 128) + 1024 + 2 * 128 * 128 + 2 * 128 * 128);
  CHECK(fa3::q_buffers(128, FLASHLAB_BF16, 2) == 2);
  CHECK(fa3::q_buffers(128, FLASHLAB_BF16, 3) == 1);
  CHECK(fa3::q_buffers(64, FLASHLAB_FP16, 3) == 2);
  CHECK(fa3::stages_o(128, FLASHLAB_BF16, 2));
  CHECK(!fa3::stages_o(128, FLASHLAB_BF16, 3));
  CHECK(fa3::stages_o(64, FLASHLAB_FP16, 3));
  const KernelConfig fa3_64 = kernel_config(FLASHLAB_KERNEL_FA3, 64, FLASHLAB_FP16);
  CHECK(fa3_64.Br == 192);  // three consumers of 64 rows
  CHECK(fa3_64.Bc == 128);
  CHECK(fa3_64.threads == 512);
  CHECK(fa3::sram_bytes(64, FLASHLAB_FP16, 3) ==
        1024 + 2 * (3 * 192 * 64 + 3 * 2 * 128 * 64) + 1024);  // 2 sQ, 3 x (sK, sV), sO
  CHECK(fa3_128.stride_align_elements == 8);
  CHECK(fa3::sram_bytes(128, FLASHLAB_BF16, 3) == 1024 + 2 * (128 * 128 + 3 * 2 * 128 * 128) + 1024);
  CHECK(!supports(FLASHLAB_KERNEL_FA3, 128, FLASHLAB_FP32));
  // The table's SRAM is that of each d's default stages: 4 at d = 64, where everything fits.
  CHECK(kernel_config(FLASHLAB_KERNEL_FA3, 64, FLASHLAB_FP16).sram_bytes ==
        fa3::sram_bytes(64, FLASHLAB_FP16, 4));
  CHECK(fa3::sram_bytes(64, FLASHLAB_FP16, 4) ==
        1024 + 2 * (3 * 192 * 64 + 4 * 2 * 128 * 64) + 1024);  // 2 sQ, 4 x (sK, sV), sO

  const KernelConfig naive = kernel_config(FLASHLAB_KERNEL_NAIVE, 59, FLASHLAB_FP16);
  CHECK(naive.Br == 0);
  CHECK(naive.Bc == 0);
  CHECK(naive.threads == 256);
  CHECK(naive.s.level == FLASHLAB_MEMORY_HBM);
  CHECK(naive.w.level == FLASHLAB_MEMORY_HBM);
  CHECK(naive.w.dtype == FLASHLAB_FP16);
  CHECK(naive.s_hbm_reads == 3);
}

TEST_CASE("fa3's FLASHLAB_FA3_AUTO: stages and ping-pong chosen per head dimension") {
  flashlab_fa3_options o{};
  o.warp_specialized = 1, o.intra_overlap = 1, o.grid = FLASHLAB_FA3_GRID_QUEUE;
  o.stages = FLASHLAB_FA3_AUTO, o.ping_pong = FLASHLAB_FA3_AUTO;
  const flashlab_fa3_options at64 = fa3::resolve_options(64, o);
  const flashlab_fa3_options at128 = fa3::resolve_options(128, o);
  CHECK(at64.stages == 4);  // measured, kernel_info.hpp: 4 stages, no ping-pong at d = 64
  CHECK(at64.ping_pong == 0);
  CHECK(at128.stages == 2);
  CHECK(at128.ping_pong == 1);
  // The most each d's SRAM holds: a fourth stage at d = 128 would need 288 KiB of the 227.
  CHECK(fa3::max_stages(64, FLASHLAB_BF16) == 4);
  CHECK(fa3::max_stages(128, FLASHLAB_BF16) == 3);
  CHECK(fa3::max_stages(128, FLASHLAB_FP16) == 3);
  CHECK(fa3::sram_bytes(128, FLASHLAB_BF16, 4) > fa3::kMaxSramPerBlock);
  for (const flashlab_fa3_options& r : {at64, at128}) {  // the other fields as given
    CHECK(r.warp_specialized == 1);
    CHECK(r.intra_overlap == 1);
    CHECK(r.grid == FLASHLAB_FA3_GRID_QUEUE);
  }
  // An explicit setting is kept at either d.
  o.stages = 1, o.ping_pong = 1;
  CHECK(fa3::resolve_options(64, o).stages == 1);
  CHECK(fa3::resolve_options(64, o).ping_pong == 1);
  o.stages = 3, o.ping_pong = 0;
  CHECK(fa3::resolve_options(128, o).stages == 3);
  CHECK(fa3::resolve_options(128, o).ping_pong == 0);
  // FLASHLAB_FA3_AUTO in one field only: that one resolved, the other kept.
  o.stages = FLASHLAB_FA3_AUTO, o.ping_pong = 1;
  CHECK(fa3::resolve_options(64, o).stages == 4);
  CHECK(fa3::resolve_options(64, o).ping_pong == 1);
  o.stages = 2, o.ping_pong = FLASHLAB_FA3_AUTO;
  CHECK(fa3::resolve_options(64, o).stages == 2);
  CHECK(fa3::resolve_options(64, o).ping_pong == 0);
}

TEST_CASE("unsupported d: the reason names d, the set taken, and the kernels that take it") {
  std::mt19937_64 rng(test::fresh_seed());
  const int64_t d = unlisted_d(rng);
  const std::string ds = "d = " + std::to_string(d);
  for (flashlab_kernel id : {FLASHLAB_KERNEL_SCALAR, FLASHLAB_KERNEL_FA2}) {
    const KernelInfo info = kernel_info(id, d, FLASHLAB_BF16);
    CHECK(!info.supported);
    CHECK(info.config.Br == 0);
    CHECK(info.config.sram_bytes == 0);
    CHECK(info.reason == ds + " is not supported by the " + std::string(info.kernel->name) +
                             " kernel: it takes d in {64, 128}; the naive kernel takes " + ds);
  }
  CHECK(kernel_info(FLASHLAB_KERNEL_NAIVE, d, FLASHLAB_BF16).supported);
  for (int64_t bad : {int64_t{0}, int64_t{-1}, kMaxIndex + 1, (int64_t{1} << 31) + 1,
                      std::numeric_limits<int64_t>::max()}) {
    const KernelInfo info = kernel_info(FLASHLAB_KERNEL_NAIVE, bad, FLASHLAB_FP32);
    CHECK(!info.supported);
    CHECK(info.reason == "d = " + std::to_string(bad) +
                             " is not supported by the naive kernel: it takes any d in [1, " +
                             std::to_string(kMaxIndex) + "]");
  }
}

TEST_CASE("unsupported or unknown dtype, unknown kernel") {
  CHECK(kernel_info(FLASHLAB_KERNEL_FA2, 64, FLASHLAB_FP32).reason ==
        "dtype fp32 is not supported by the fa2 kernel: it takes fp16 or bf16; the naive and "
        "scalar kernels take fp32");
  for (int32_t dtype : {-1, 3, std::numeric_limits<int32_t>::max()}) {
    const KernelInfo info = kernel_info(FLASHLAB_KERNEL_NAIVE, 64, dtype);
    CHECK(!info.supported);
    CHECK(info.reason == "dtype = " + std::to_string(dtype) +
                             " is unknown: use 0 (fp32), 1 (fp16) or 2 (bf16)");
  }
  for (int32_t kernel : {-1, 4, std::numeric_limits<int32_t>::min()}) {
    const KernelInfo info = kernel_info(kernel, 64, FLASHLAB_BF16);
    CHECK(info.kernel == nullptr);
    CHECK(info.reason == "kernel = " + std::to_string(kernel) +
                             " is unknown: use 0 (naive), 1 (scalar), 2 (fa2) or 3 (fa3)");
  }
}

// The decode kernels' facts: a tile is one k16 slice of W V per warp; the ring of K and V
// tiles is the same 96 KiB for both head dimensions and two blocks of it fit an H200 SM
// (228 KiB, 1 KiB of it reserved per block); the merge fits in the ring; a thread's keys of a
// tile lie on one page; the split heuristic stays in [1, kMaxSplits] and keeps 95% of a
// wave's slots busy.
TEST_CASE("decode's facts: tiles, SRAM, page sizes, split heuristic, workspace") {
  constexpr int64_t kSmSramBytes = 228 * 1024, kReservedPerBlock = 1024, kH200Sms = 132;
  CHECK(decode::kBc == decode::kWarps * decode::kKeysPerWarp);
  CHECK(decode::kKeysPerWarp == 16);      // the k of mma.sync m16n8k16
  CHECK(decode::kMaxRowsPerBlock == 16);  // its m
  for (int64_t d : decode::kHeadDims) {
    CAPTURE(d);
    CHECK(decode::bc(d) == decode::kBc);
    CHECK(decode::stage_bytes(d) == decode::kBc * d * 2 * 2);
    CHECK(decode::stages(d) * decode::stage_bytes(d) == 96 * 1024);
    CHECK(decode::bytes_in_flight_per_block(d) == 96 * 1024 - decode::stage_bytes(d));
    CHECK(decode::sram_bytes(d) == 96 * 1024);
    CHECK(decode::merge_bytes(d) == decode::kWarps * 16 * (d + 2) * 4);
    CHECK(decode::merge_bytes(d) <= decode::sram_bytes(d));
    CHECK(decode::kBlocksPerSm * (decode::sram_bytes(d) + kReservedPerBlock) <= kSmSramBytes);
    CHECK((decode::kBlocksPerSm + 1) * (decode::sram_bytes(d) + kReservedPerBlock) > kSmSramBytes);
    // every 16-byte chunk of a tile's K is copied by exactly one thread
    CHECK(decode::kThreads * decode::keys_per_thread(d) == decode::kBc * d / 8);
    CHECK(decode::kMinPageSize % decode::keys_per_thread(d) == 0);
  }
  CHECK(!decode::supports_head_dim(96));
  CHECK(!decode::supports_dtype(FLASHLAB_FP32));
  CHECK(decode::supports_dtype(FLASHLAB_BF16));
  for (int64_t ps : {16, 64, 256, 65536}) CHECK(decode::is_page_size(ps));
  for (int64_t ps : {0, 8, 24, 48, 131072, -16}) CHECK(!decode::is_page_size(ps));
  CHECK(decode::row_blocks(4, 1) == 1);
  CHECK(decode::row_blocks(4, 16) == 4);
  CHECK(decode::row_blocks(16, 1) == 1);
  CHECK(decode::row_blocks(1, 17) == 2);
  CHECK(decode::row_blocks(32, 1) == 2);
  // ANCHORS.md's shape, GQA 32/8, N_q = 1, 2 blocks per SM on 132 SMs (a wave of 264): the
  // fewest splits that keep 95% of the slots busy, unless the cache is too short for them.
  // B = 8: 64 (b, KV head) pairs, 4 splits = 256 blocks (3 would be 192: 73%).
  CHECK(decode::auto_splits(8, 8, 4, 1, 131072, false, kH200Sms) == 4);
  CHECK(decode::auto_splits(8, 8, 4, 1, 1024, false, kH200Sms) == 2);
  // B = 1: 8 pairs. Two blocks an SM would take 32 splits = 256 (31 would be 248: 93.9%),
  // more than the combine loads at once (16); 16 splits = 128 blocks keep 97% of one block an
  // SM busy (15 would be 120: 90.9%), within one group.
  static_assert(decode::kCombineSplitsInFlight == 16);
  CHECK(decode::auto_splits(1, 8, 4, 1, 32768, false, kH200Sms) == 16);
  CHECK(decode::fewest_filling_splits(8, 2 * kH200Sms, decode::kMaxSplits) == 32);
  CHECK(decode::fills_one_block_an_sm(8 * 16, kH200Sms));
  CHECK_FALSE(decode::fills_one_block_an_sm(8 * 15, kH200Sms));   // 120 of 132: 90.9%
  CHECK_FALSE(decode::fills_one_block_an_sm(2 * 128, kH200Sms));  // two blocks an SM
  CHECK(decode::fewest_filling_splits(8, kH200Sms, 15) == 15);  // none fills: the best share
  // One pair never fills 95% of a wave, nor 16 splits one block an SM: the best share
  // within kMaxSplits.
  CHECK(decode::auto_splits(1, 1, 4, 1, 1 << 20, false, kH200Sms) == decode::kMaxSplits);
  // 5 pairs: the wave rule takes 51 splits (255 of 264 slots, 96.6%; 50 would be 94.7%), and
  // within 16 splits one block an SM is never 95% busy (at most 80 of 132), so 51 stays.
  CHECK(decode::auto_splits(5, 1, 4, 1, 1 << 20, false, kH200Sms) == 51);
  // A cache too short for 16 splits of kMinKeysPerSplit keys: the cap, not one group.
  CHECK(decode::auto_splits(1, 8, 4, 1, 4096, false, kH200Sms) == 8);
  // B = 32: one split fills 256 of 264 slots; B = 64: 512 of 2 x 264 (97%).
  CHECK(decode::auto_splits(32, 8, 4, 1, 32768, false, kH200Sms) == 1);
  CHECK(decode::auto_splits(64, 8, 4, 1, 32768, false, kH200Sms) == 1);
  // B = 16: 128 blocks. 2 splits would fill 256 of 264 slots; one split keeps 128 of 132 SMs
  // busy (97%) with one block each, and needs no combine: 1, at every length, on a
  // contiguous cache; a paged one keeps the two blocks an SM of 2 splits.
  CHECK(decode::auto_splits(16, 8, 4, 1, 32768, false, kH200Sms) == 1);
  CHECK(decode::auto_splits(16, 8, 4, 1, 2048, false, kH200Sms) == 1);
  CHECK(decode::auto_splits(16, 8, 4, 1, 32768, true, kH200Sms) == 2);
  // Past one block an SM the lone split's rule does not apply: B = 48 (384 blocks) keeps the
  // wave rule's 2 (768 of 792 slots), and B = 31 (248 blocks, 17 splits by the wave rule)
  // keeps 17, no count within 16 filling one block an SM.
  CHECK(decode::auto_splits(48, 8, 4, 1, 32768, false, kH200Sms) == 2);
  CHECK(decode::auto_splits(31, 8, 4, 1, 32768, false, kH200Sms) == 17);
  CHECK(decode::auto_splits(31, 8, 4, 1, 32768, true, kH200Sms) == 17);
  // Elsewhere the layout changes nothing: B = 1 takes 16 and B = 8 4, paged or not.
  for (const bool paged : {false, true}) {
    CHECK(decode::auto_splits(1, 8, 4, 1, 32768, paged, kH200Sms) == 16);
    CHECK(decode::auto_splits(8, 8, 4, 1, 32768, paged, kH200Sms) == 4);
    CHECK(decode::auto_splits(64, 8, 4, 1, 32768, paged, kH200Sms) == 1);
  }
  CHECK(decode::fewest_filling_splits(128, 2 * kH200Sms, decode::kMaxSplits) == 2);
  // 15 sequences: 120 blocks, 91% of the SMs with one split: the wave rule's count.
  CHECK(decode::auto_splits(15, 8, 4, 1, 32768, false, kH200Sms) ==
        decode::fewest_filling_splits(120, 2 * kH200Sms, 64));
  CHECK(decode::auto_splits(15, 8, 4, 1, 32768, false, kH200Sms) > 1);
  // N_q = 16: 64 packed rows, 4 row blocks per pair: B = 8 has 256 blocks a split.
  CHECK(decode::auto_splits(8, 8, 4, 16, 32768, false, kH200Sms) == 1);
  for (int64_t batch : {1, 3, 8, 64})
    for (int64_t len : {1, 100, 4096, 131072}) {
      const int s = decode::auto_splits(batch, 8, 4, 16, len, false, kH200Sms);
      CHECK(s >= 1);
      CHECK(s <= decode::kMaxSplits);
    }
  // The split grid's rule: 10 tiles in 4 splits of q = 3: 0, 3, 6, 9, 10; in 6 splits of 2
  // the last two are empty (10, 10, 10).
  for (int s = 0; s <= 4; ++s) CHECK(decode::split_first_tile(10, 4, s) == std::min(3 * s, 10));
  CHECK(decode::split_first_tile(10, 6, 5) == 10);
  CHECK(decode::split_first_tile(10, 6, 6) == 10);
  // The queue's pieces (05_decode_queue.cu): they cover the sequence in order, shrink along it
  // (by at most one tile out of order where the floors round), and the first is about 2P - 1
  // times the last. Worked by hand: T = 64 tiles, P = 4: 64 - floor(64 (4 - j)^2 / 16) =
  // 0, 28, 48, 60, 64: pieces of 28, 20, 12 and 4 tiles (7 : 5 : 3 : 1).
  CHECK(decode::piece_first_tile(64, 4, 0) == 0);
  CHECK(decode::piece_first_tile(64, 4, 1) == 28);
  CHECK(decode::piece_first_tile(64, 4, 2) == 48);
  CHECK(decode::piece_first_tile(64, 4, 3) == 60);
  CHECK(decode::piece_first_tile(64, 4, 4) == 64);
  for (int64_t tiles : {0, 1, 5, 64, 513, 2048})
    for (int64_t pieces : {1, 2, 7, 16, 64}) {
      CHECK(decode::piece_first_tile(tiles, pieces, 0) == 0);
      CHECK(decode::piece_first_tile(tiles, pieces, pieces) == tiles);
      for (int64_t j = 0; j < pieces; ++j) {
        const int size = decode::piece_first_tile(tiles, pieces, j + 1) -
                         decode::piece_first_tile(tiles, pieces, j);
        CHECK(size >= 0);
        if (j + 2 <= pieces)
          CHECK(size + 1 >= decode::piece_first_tile(tiles, pieces, j + 2) -
                                 decode::piece_first_tile(tiles, pieces, j + 1));
      }
    }
  // The automatic count: the last piece keeps kQueueMinLastPieceTiles tiles or more. L =
  // 131072: 2048 tiles, 22 pieces (2048 / 22^2 = 4.2; 23 would leave 3.9); L = 4096: 64
  // tiles, 4 pieces; one tile: one piece; capped at kMaxSplits.
  CHECK(decode::auto_pieces(131072) == 22);
  CHECK(decode::auto_pieces(4096) == 4);
  CHECK(decode::auto_pieces(1) == 1);
  CHECK(decode::auto_pieces(int64_t(1) << 30) == decode::kMaxSplits);
  // Two blocks of the queue's grid fit an SM beside the runtime's share, a third does not.
  for (int64_t d : decode::kHeadDims) {
    CHECK(decode::queue_sram_bytes(d) == decode::ring_bytes(d) + decode::queue_merge_bytes(d) +
                                             decode::kQueueClaimBytes);
    CHECK(decode::kBlocksPerSm * (decode::queue_sram_bytes(d) + kReservedPerBlock) <= kSmSramBytes);
  }
  CHECK(decode::queue_merge_bytes(128) == 4 * 8 * 130 * 4);
  // A state is U (d), m and l padded to whole 32-byte sectors: 136 floats at d = 128 (17
  // sectors), 72 at d = 64 (9); every state starts on a sector.
  CHECK(decode::state_floats(128) == 136);
  CHECK(decode::state_floats(64) == 72);
  for (int64_t d : decode::kHeadDims) {
    CHECK(decode::state_floats(d) >= d + 2);
    CHECK(decode::state_floats(d) * 4 % 32 == 0);
    CHECK(decode::state_floats(d) - (d + 2) < kFloatsPerSector);
  }
  CHECK(decode::kWorkspaceHeaderBytes % 32 == 0);
  CHECK(decode::workspace_bytes(2, 8, 4, 128, 3) ==
        decode::kWorkspaceHeaderBytes + 2 * 8 * 4 * 3 * 136 * 4);
}

}  // namespace
}  // namespace flashlab::gpu

namespace flashlab::gpu {
namespace {

TEST_CASE("decode's kv_l2_policy: which copies carry the evict-first hint") {
  constexpr int64_t kH200L2 = 62914560, kH100L2 = 52428800;  // cudaDevAttrL2CacheSize
  // A call's own policy whatever its cache.
  for (int64_t kv : {int64_t{1}, kH200L2 * 100}) {
    CHECK(decode::kv_evict_first(FLASHLAB_DECODE_L2_EVICT_FIRST, kv, kH200L2));
    CHECK_FALSE(decode::kv_evict_first(FLASHLAB_DECODE_L2_EVICT_NORMAL, kv, kH200L2));
  }
  // Automatic: evict-first up to kEvictFirstMaxL2Multiple L2s of K and V, plain past them.
  const double edge = double(decode::kEvictFirstMaxL2Multiple * kH200L2);
  CHECK(decode::kv_evict_first(FLASHLAB_DECODE_L2_AUTO, edge, kH200L2));
  CHECK_FALSE(decode::kv_evict_first(FLASHLAB_DECODE_L2_AUTO, edge + 1, kH200L2));
  // A cache past 2^63 bytes (no memory holds it, but the parameters' ranges allow it) is
  // weighed as such, not wrapped around to a small one.
  CHECK(decode::cache_kv_bytes(65536, int64_t{1} << 31, 1 << 20, 128, FLASHLAB_BF16) > 9.2e18);
  CHECK_FALSE(decode::kv_evict_first(
      FLASHLAB_DECODE_L2_AUTO,
      decode::cache_kv_bytes(65536, int64_t{1} << 31, 1 << 20, 128, FLASHLAB_BF16), kH200L2));
  // The shapes measured: 32 query heads over 8 KV heads, d = 128, bf16. B = 8 at L = 4,096
  // (134 MB: 2.1 and 2.6 L2s) and B = 1 at 32,768 (the same bytes) take the hint on both cards;
  // B = 8 at 8,192 (4.3 and 5.1 L2s) and the goal's B = 8 at L = 32,768 and 131,072 do not.
  const auto bytes = [](int64_t batch, int64_t length) {
    return decode::cache_kv_bytes(batch, length, 8, 128, FLASHLAB_BF16);
  };
  CHECK(bytes(8, 4096) == 134217728.0);
  for (int64_t l2 : {kH200L2, kH100L2}) {
    CAPTURE(l2);
    CHECK(decode::auto_kv_l2_policy(bytes(8, 4096), l2) == FLASHLAB_DECODE_L2_EVICT_FIRST);
    CHECK(decode::auto_kv_l2_policy(bytes(1, 32768), l2) == FLASHLAB_DECODE_L2_EVICT_FIRST);
    for (const auto& [batch, length] :
         {std::pair<int64_t, int64_t>{8, 8192}, {8, 32768}, {8, 131072}, {2, 32768}})
      CHECK(decode::auto_kv_l2_policy(bytes(batch, length), l2) == FLASHLAB_DECODE_L2_EVICT_NORMAL);
  }
  for (int32_t policy : {-1, 3, 100}) CHECK_FALSE(decode::is_kv_l2_policy(policy));
}

}  // namespace
}  // namespace flashlab::gpu

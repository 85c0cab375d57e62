// The hardware chapters' numbers, each against an independent computation: occupancy against
// a warp-by-warp placement and the kernels' own build targets; the grid's waves by counting;
// the compiler's report as parsed and, where this build wrote it, as the real kernel has it;
// the mma fragments against the inverse of the PTX ISA's layout; bank conflicts against hand
// cases and the closed form of an 8-way conflict; the double-buffer timeline against its
// closed form; the paged cache's waste and table reads against key-by-key counts.
#include "10-decode/paged_cache.hpp"
#include "11-fa2-kernel/bank_conflicts.hpp"
#include "11-fa2-kernel/double_buffer.hpp"
#include "11-fa2-kernel/fragments.hpp"
#include "12-occupancy/occupancy.hpp"
#include "12-occupancy/ptxas_report.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "kit/lesson_registry.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/swizzle.hpp"
#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

using namespace flashlab::app;
namespace gpu = flashlab::gpu;

namespace {

const flashlab::sim::SmLimits& h200() { return flashlab::sim::find_profile("h200").sm; }

std::string lesson_output(int number) {
  std::ostringstream out;
  std::istringstream in;
  LessonContext ctx(out, in, Style::plain(), false);
  find_lesson(number).run(ctx);
  return out.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Blocks of `warps` warps placed one warp at a time, each on the scheduler with the most
// registers left, until a block no longer fits whole.
int blocks_by_placing_warps(int warps, int registers_per_thread) {
  const auto& sm = h200();
  const int per_warp = (32 * registers_per_thread + sm.register_granule - 1) / sm.register_granule *
                       sm.register_granule;
  std::vector<int> left(std::size_t(sm.schedulers), sm.registers / sm.schedulers);
  for (int blocks = 0;; ++blocks) {
    std::vector<int> trial = left;
    for (int w = 0; w < warps; ++w) {
      auto most = std::max_element(trial.begin(), trial.end());
      if (*most < per_warp) return blocks;
      *most -= per_warp;
    }
    left = trial;
  }
}

}  // namespace

TEST_CASE("occupancy: the register limit, placed warp by warp, for every register count") {
  for (int warps : {1, 4, 8}) {
    for (int r = 1; r <= h200().max_registers_per_thread; ++r) {
      CAPTURE(warps);
      CAPTURE(r);
      CHECK(occupancy(h200(), 32 * warps, r, 0).by_registers == blocks_by_placing_warps(warps, r));
    }
  }
}

TEST_CASE("occupancy: the kernels' own targets (kernel_info.hpp) come out of the formula") {
  const auto& sm = h200();
  const auto fa2 = gpu::kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16);
  // fa2: 128 threads, 2 blocks per SM, by registers and by SRAM alike.
  CHECK(register_budget(sm, fa2.threads, fa2.blocks_per_sm) == 255);
  const Occupancy o = occupancy(sm, fa2.threads, 255, fa2.sram_bytes);
  CHECK(o.blocks == fa2.blocks_per_sm);
  CHECK(o.by_shared == int((228 * 1024) / (fa2.sram_bytes + 1024)));
  CHECK(o.warps_per_scheduler(sm) == doctest::Approx(2.0));
  // decode: 4 warps, 2 blocks per SM by SRAM (its ring), with up to 255 registers a thread.
  using namespace gpu::decode;
  CHECK(register_budget(sm, kThreads, kBlocksPerSm) == 255);
  CHECK(occupancy(sm, kThreads, 255, sram_bytes(128)).blocks == kBlocksPerSm);
  CHECK(occupancy(sm, kThreads, 255, sram_bytes(64)).blocks == kBlocksPerSm);
  CHECK(occupancy(sm, kThreads, 168, 0).by_registers == 3);
  // the backward's main kernel: 256 threads, one block, at most 255 registers.
  CHECK(register_budget(sm, gpu::fa2_backward::kThreads, gpu::fa2_backward::kBlocksPerSm) == 255);
  CHECK(occupancy(sm, 128, 128, 0).by_registers == 4);
}

TEST_CASE("occupancy: impossible blocks are refused, saying what would fit") {
  const auto& sm = h200();
  CHECK_THROWS_WITH_AS(occupancy(sm, 100, 64, 0), doctest::Contains("multiple of 32"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(occupancy(sm, 0, 64, 0), doctest::Contains("multiple of 32"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(occupancy(sm, 4096, 64, 0), doctest::Contains("2048"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(occupancy(sm, 128, 256, 0), doctest::Contains("between 1 and 255"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(occupancy(sm, 128, 0, 0), doctest::Contains("between 1 and 255"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(occupancy(sm, 128, 64, 228 * 1024), doctest::Contains("at most"),
                       std::invalid_argument);
  CHECK_THROWS_AS(register_budget(sm, 1024, 9), std::invalid_argument);  // 288 warps
  CHECK_THROWS_AS(grid_fill(0, 132, 2), std::invalid_argument);
  CHECK_THROWS_AS(grid_fill(10, 0, 2), std::invalid_argument);
}

TEST_CASE("grid: waves and busy slots, counted wave by wave") {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t blocks = 1 + rng() % 5000;
    const int sms = 1 + int(rng() % 200), per_sm = 1 + int(rng() % 4);
    std::int64_t left = blocks, waves = 0;
    while (left > 0) left -= std::int64_t(sms) * per_sm, ++waves;
    const GridFill g = grid_fill(blocks, sms, per_sm);
    CHECK(g.waves == waves);
    CHECK(g.slot_share == doctest::Approx(double(blocks) / double(waves * sms * per_sm)));
    CHECK(g.sms_busy == std::min<std::int64_t>(blocks, sms));
  }
}

TEST_CASE("lesson 12: blocks per (batch, head) against per query tile at B = 1, H = 16, N = 8192") {
  const std::string out = lesson_output(12);
  const int Br = gpu::kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16).Br;
  const std::int64_t tiles = 1 * 16 * ((8192 + Br - 1) / Br);
  CHECK(
      contains(out, fmt::format("1\t16\t8192\t16\t16 of 132\t{}\t{}", tiles, (tiles + 263) / 264)));
  CHECK(contains(out, fmt::format("leaves {} of 132 SMs idle", 132 - 16)));
  // what 168 registers give: 5376 a warp, 3 warps a scheduler
  CHECK(contains(out, fmt::format("168\t{}\t3\t3\t2\t2", 168 * 32)));
}

// What step 5 says, fixed by kernel_info.hpp: a consumer's data (S, U, its W buffers) fits its
// registers at both d, and at d = 64 two W buffers would not leave any room.
static_assert(64 + 128 / 2 + 2 * 32 < gpu::fa3::consumer_registers(128));
static_assert(64 + 64 / 2 + 1 * 32 < gpu::fa3::consumer_registers(64));
static_assert(64 + 64 / 2 + 2 * 32 >= gpu::fa3::consumer_registers(64));

TEST_CASE("lesson 12: fa3's registers add up to the SM's file, and its data fits a consumer") {
  namespace k = gpu::fa3;
  const std::string out = lesson_output(12);
  REQUIRE(contains(out, "Step 5: fa3: a producer that gives its registers away"));
  for (int d : {128, 64}) {
    CAPTURE(d);
    const int threads = k::threads(true, d), consumers = k::consumer_warpgroups(d);
    const int used =
        128 * (k::producer_registers(d) + consumers * k::consumer_registers(d));
    // A consumer thread's share of S (64 x 128 fp32), U (64 x d fp32) and its W buffers.
    const int data = 64 * 128 / 128 + 64 * d / 128 + k::w_buffers(d) * 32;
    CHECK(contains(out, fmt::format("\n{}\t{}\t{}\t{}\t{}\t{}\t{}\t{} of 65536\t", d, consumers,
                                    k::br(d), threads, 65536 / threads / 8 * 8,
                                    k::producer_registers(d), k::consumer_registers(d), used)));
    CHECK(contains(out, fmt::format("\t{}\t{}\n", k::w_buffers(d), data)));
  }
}

TEST_CASE("lesson 12: the consumers' own tiles at d = 64, by hand at N = 1024, and the gain quoted") {
  const std::string out = lesson_output(12);
  REQUIRE(contains(out, "Step 8: Unequal consumers: inside a block, at d = 64"));
  REQUIRE(gpu::fa3::br(64) == 192);
  // One head of N = 1024: six blocks of 192 rows (the last, rows 960..1151, with consumers 1
  // and 2 past N), eight KV tiles. Without the mask 18 consumers x 8 tiles = 144, 16 with rows
  // x 8 = 128. Under the top-left mask block t loads 2 3 5 6 8 8 tiles (x 3 = 96) and
  // consumer c's last row 192 t + 64 c + 63 sees ceil((192 t + 64 (c + 1)) / 128) of them:
  // 1 1 2 | 2 3 3 | 4 4 5 | 5 6 6 | 7 7 8 | 8 - - = 72.
  CHECK(contains(out, "\n1024\tnone\t144\t128\t11.1%\n"));
  CHECK(contains(out, "\n1024\tcausal\t96\t72\t25.0%\n"));
  CHECK(contains(out, "rows 960..1151, the last\n2 consumers past N"));
  const auto& gain = measured::kFa3SkipUnseenN1024;
  CHECK(contains(out, fmt::format("{:.3f} and {:.3f} under the\nmask, {:.3f} and {:.3f} without it",
                                  gain.causal[0], gain.causal[1], gain.none[0], gain.none[1])));
  CHECK(contains(out, std::string(gain.source.shape)));
  // The partly empty tile first, tiles started 128 rows before row 0 (rows -128..63, 64..255,
  // ..., 832..1023): the busiest consumers' tiles 1 2 4 5 7 8 (x 3 = 81) against the blocks'
  // 2 3 5 6 8 8 above (x 3 = 96); and its measured ratio quoted from the one place it is kept.
  const auto& lead = measured::kFa3LeadFirstN1024;
  CHECK(contains(out, "At N = 1024 starting the tiles 128 rows before row 0"));
  CHECK(contains(out, "falls from 96 tile-slots to 81"));
  CHECK(contains(out, fmt::format("{:.3f} of the kernel without it under the mask\n({:.3f} without",
                                  lead.causal, lead.none)));
  CHECK(contains(out, "(72 either way)"));
}

TEST_CASE("ptxas report: parsed as ptxas prints it, malformed entries refused") {
  const std::string text =
      "ptxas info    : Compiling entry function "
      "'_ZN8flashlab3gpu12_GLOBAL__N_110fa2_kernelI13__nv_bfloat16Li128ELi64ELb1EEEvi' for "
      "'sm_90a'\n"
      "ptxas info    : Function properties for x\n"
      "    16 bytes stack frame, 32 bytes spill stores, 36 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 16 bytes cumulative stack size\n"
      "ptxas info    : Compiling entry function '_Z5otheri' for 'sm_90a'\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers\n";
  const auto kernels = parse_ptxas_report(text);
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].registers == 255);
  CHECK(kernels[0].barriers == 1);
  CHECK(kernels[0].stack_bytes == 16);
  CHECK(kernels[0].spill_store_bytes == 32);
  CHECK(kernels[0].spill_load_bytes == 36);
  CHECK(kernels[1].registers == 40);
  CHECK(kernels[1].name == "other(int)");
  const auto fa2 = fa2_instance(kernels[0].name);
  REQUIRE(fa2);
  CHECK(fa2->dtype == "bf16");
  CHECK(fa2->d == 128);
  CHECK(fa2->Bc == 64);
  CHECK(fa2->dropout);
  CHECK_FALSE(fa2_instance(kernels[1].name));
  CHECK(parse_ptxas_report("").empty());
  CHECK_THROWS_WITH_AS(
      parse_ptxas_report("ptxas info    : Compiling entry function '_Z1fv' for 'sm_90a'\n"),
      doctest::Contains("_Z1fv"), std::invalid_argument);
}

#ifdef FLASHLAB_FA2_PTXAS_REPORT
TEST_CASE("ptxas report of this build: every fa2 instantiation, at the occupancy it is built for") {
  std::ifstream in(FLASHLAB_FA2_PTXAS_REPORT);
  REQUIRE_MESSAGE(in, "build the target flashlab_fa2_ptxas_report first");
  std::ostringstream text;
  text << in.rdbuf();
  std::set<std::tuple<std::string, int, bool>> seen;
  for (const KernelResources& k : parse_ptxas_report(text.str())) {
    const auto fa2 = fa2_instance(k.name);
    if (!fa2) continue;
    CAPTURE(k.name);
    const auto c = gpu::kernel_config(FLASHLAB_KERNEL_FA2, fa2->d, FLASHLAB_BF16);
    CHECK(fa2->Bc == c.Bc);
    CHECK(occupancy(h200(), c.threads, k.registers, c.sram_bytes).blocks == c.blocks_per_sm);
    if (!fa2->dropout) CHECK(k.spill_store_bytes == 0);  // bench/gpu/NOTES.md: no spills
    seen.insert({fa2->dtype, fa2->d, fa2->dropout});
  }
  const auto* record = gpu::find_kernel(FLASHLAB_KERNEL_FA2);
  CHECK(seen.size() == std::size_t(2 * 2 * record->head_dims.count));  // dtypes x dropout x d
}
#else
TEST_CASE("lesson 12 in a build without nvcc says the compiler's report is missing") {
  CHECK(contains(lesson_output(12), "The compiler's report is missing: this build found no nvcc"));
}
#endif

TEST_CASE("mma fragments: the PTX ISA's layout against its inverse, every element once") {
  // Inverses, written from the layout's other side: which lane, register and half hold
  // (row, col).
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 16; ++col) {
      const Owner a = fragment_owners(Fragment::A)[row][col];
      CHECK(a.lane == 4 * (row % 8) + (col % 8) / 2);
      CHECK(a.reg == row / 8 + 2 * (col / 8));
      CHECK(a.half == col % 2);
    }
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) {
      const Owner b = fragment_owners(Fragment::B)[k][n];
      CHECK(b.lane == 4 * n + (k % 8) / 2);
      CHECK(b.reg == k / 8);
      CHECK(b.half == k % 2);
    }
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 8; ++col) {
      const Owner c = fragment_owners(Fragment::C)[row][col];
      CHECK(c.lane == 4 * (row % 8) + col / 2);
      CHECK(c.reg == 2 * (row / 8) + col % 2);
    }
  CHECK_THROWS_AS(fragment_position(Fragment::A, 32, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(fragment_position(Fragment::B, 0, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(fragment_position(Fragment::C, 0, 0, 1), std::invalid_argument);
}

TEST_CASE("ldmatrix with fa2's lane addresses hands every mma its operand, at every k-slice") {
  for (int kk = 0; kk < 8; ++kk)
    for (Operand op : {Operand::Q, Operand::K, Operand::V}) {
      const FeedCheck c = check_ldmatrix_feeds_mma(op, kk);
      CHECK(c.elements == 256);
      CHECK(c.matching == 256);
    }
}

TEST_CASE("banks: wavefronts of hand-worked phases") {
  const auto wf = [](std::vector<std::int64_t> a, int bytes) { return wavefronts(a, bytes); };
  CHECK(wf({0, 128, 256, 384, 512, 640, 768, 896}, 16) == 8);  // same 4 banks, 8 rows
  CHECK(wf({0, 16, 32, 48, 64, 80, 96, 112}, 16) == 1);        // 128 consecutive bytes
  CHECK(wf({0, 0, 0, 0, 0, 0, 0, 0}, 16) == 1);                // one chunk, broadcast
  CHECK(wf({0, 256, 16, 272}, 16) == 2);                       // two rows of 256 bytes
  std::vector<std::int64_t> stride8;
  for (int lane = 0; lane < 32; ++lane) stride8.push_back(8 * lane);
  CHECK(wf(stride8, 4) == 2);  // 4-byte words 8 bytes apart: two to a bank
  CHECK(bank_of(4 * 33) == 1);
  CHECK_THROWS_AS(wf({0}, 3), std::invalid_argument);
  CHECK_THROWS_AS(wf({2}, 4), std::invalid_argument);
}

TEST_CASE("swizzle: any 8 consecutive rows put each logical chunk in 8 different chunks") {
  namespace swz = gpu::swizzle;
  for (int r0 = 0; r0 < 24; ++r0)
    for (int c = 0; c < 16; ++c) {
      std::set<int> stored;
      for (int r = r0; r < r0 + 8; ++r) {
        const int s = swz::stored_chunk(r, c);
        CHECK(s / 8 == c / 8);  // stays in its group of 8 chunks (128 bytes)
        stored.insert(s);
      }
      CHECK(stored.size() == 8u);
    }
  CHECK(swz::offset(128, 3, 5) == 3 * 128 + (5 ^ 3) * 8);
}

TEST_CASE("lesson 11: fa2's SRAM accesses, 1 wavefront a phase swizzled, 8 without") {
  for (int d : {64, 128}) {
    CAPTURE(d);
    const auto c = gpu::kernel_config(FLASHLAB_KERNEL_FA2, d, FLASHLAB_BF16);
    const int m_tiles = c.Br / (c.threads / 32) / 16;
    const auto acc = fa2_sram_accesses(d, c.Br, c.Bc, c.threads);
    REQUIRE(acc.size() == 4u);
    const int ldmatrix[] = {m_tiles * d / 16, d / 16 * c.Bc / 16, c.Bc / 16 * d / 16};
    for (int i = 0; i < 3; ++i) {
      CHECK(acc[i].instructions == ldmatrix[i]);
      CHECK(acc[i].phases == 4 * ldmatrix[i]);
      CHECK(acc[i].wavefronts_swizzled == acc[i].phases);
      // rows of d x 2 bytes, a multiple of 128: the 8 rows of a phase share 4 banks
      CHECK(acc[i].wavefronts_plain == 8 * acc[i].phases);
    }
    // the copies: K and V, Bc rows of d / 8 chunks each, 32 chunks an instruction
    const int copies = 2 * c.Bc * (d / 8) / c.threads;
    CHECK(acc[3].instructions == copies);
    CHECK(acc[3].wavefronts_swizzled == 4 * copies);
    CHECK(acc[3].wavefronts_plain == 4 * copies);
  }
  const std::string out = lesson_output(11);
  for (int d : {64, 128})
    CHECK(contains(
        out, flashlab::sim::format_bytes(
                 double(gpu::kernel_config(FLASHLAB_KERNEL_FA2, d, FLASHLAB_BF16).sram_bytes))));
  CHECK(contains(out, "256\t256"));
}

TEST_CASE("double buffering: the timeline against its closed form") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> time(0.1, 3.0);
  for (int tiles : {1, 2, 7, 64}) {
    const double L = time(rng), C = time(rng);
    CAPTURE(tiles);
    const auto one = buffered_timeline(tiles, 1, L, C);
    const auto two = buffered_timeline(tiles, 2, L, C);
    CHECK(one.back().compute_end == doctest::Approx(tiles * (L + C)));
    CHECK(two.back().compute_end == doctest::Approx(L + (tiles - 1) * std::max(L, C) + C));
    for (int j = 0; j < tiles; ++j) {
      CHECK(two[std::size_t(j)].buffer == j % 2);
      CHECK(two[std::size_t(j)].compute_start >= two[std::size_t(j)].load_end);
    }
  }
  const auto spans = buffered_timeline(3, 2, 1.0, 1.0);
  const auto rows = draw_timeline(spans, 4.0, 8);
  CHECK(rows[0] == "001122..");
  CHECK(rows[1] == "..001122");
  CHECK_THROWS_AS(buffered_timeline(0, 2, 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(buffered_timeline(3, 3, 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(buffered_timeline(3, 2, -1, 1), std::invalid_argument);
  CHECK_THROWS_AS(draw_timeline(spans, 0.0, 8), std::invalid_argument);
}

TEST_CASE("paged cache: waste, key by key") {
  const std::vector<std::int64_t> lengths{1, 17, 97, 113, 1023, 1024, 4000, 32768};
  for (std::int64_t page : {1, 16, 64, 256}) {
    std::int64_t reserved = 0;
    for (std::int64_t len : lengths) {
      std::set<std::int64_t> pages;
      for (std::int64_t key = 0; key < len; ++key) pages.insert(key / page);
      reserved += std::int64_t(pages.size()) * page;
    }
    const CacheUse u = paged_use(lengths, page);
    CHECK(u.reserved == reserved);
    CHECK(u.used == std::accumulate(lengths.begin(), lengths.end(), std::int64_t(0)));
  }
  CHECK(contiguous_use(lengths, 32768).wasted() ==
        32768 * std::int64_t(lengths.size()) -
            std::accumulate(lengths.begin(), lengths.end(), std::int64_t(0)));
  CHECK_THROWS_WITH_AS(contiguous_use(std::vector<std::int64_t>{40000}, 32768),
                       doctest::Contains("raise max_len"), std::invalid_argument);
  CHECK_THROWS_AS(paged_use(std::vector<std::int64_t>{0}, 16), std::invalid_argument);
  CHECK_THROWS_AS(paged_use(std::vector<std::int64_t>{5}, 0), std::invalid_argument);
}

TEST_CASE("lesson 10: the paged steps' waste, from the requests' lengths") {
  const std::string out = lesson_output(10);
  const std::vector<std::int64_t> lengths{1, 17, 97, 113, 1023, 4000, 12345, 32768};
  std::int64_t used = 0;
  for (auto len : lengths) used += len;
  const double share = 1.0 - double(used) / (32768.0 * double(lengths.size()));
  CHECK(contains(out, fmt::format("wasted share\t{:.1f}%", 100 * share)));
  CHECK(contains(out, "Step 8: The block table"));
}

TEST_CASE("lesson 10: equal blocks on unequal SMs, figures derived from the measured ones") {
  namespace m = flashlab::app::measured;
  const std::string out = lesson_output(10);
  CHECK(contains(out, "Step 6: Equal blocks, unequal SMs"));
  const auto& e = m::kDecodeBlockEnds;
  // The ends in order, and the balanced end the lesson derives: the first block's end over
  // the share of the work done by then, printed with its ratio to the last end.
  CHECK(e.first <= e.p10);
  CHECK(e.p10 <= e.median);
  CHECK(e.median <= e.p90);
  CHECK(e.p90 <= e.last);
  const double balanced = e.first / e.done_at_first;
  CHECK(balanced < e.last);
  CHECK(contains(out, fmt::format("grid would end at {:.0f} us, {:.3f} of the {:.0f} us",
                                  balanced, balanced / e.last, e.last)));
  CHECK(contains(out, fmt::format("end {:.0f}% apart", 100 * (e.last / e.first - 1))));
  // Every forced count of the table, with its blocks and its ratio to cuDNN.
  for (const auto& r : m::kDecodeManySplits) {
    CAPTURE(r.splits);
    CHECK(contains(out, fmt::format("{}{}\t{}\t{:.2f}\t{:.3f}", r.automatic ? "auto: " : "",
                                    r.splits, 64 * r.splits, r.tbps,
                                    r.tbps / m::kDecodeManySplitsCudnn)));
  }
  // The library's own choice at this shape, on the H200's SM count, is the one measured as auto.
  for (const auto& r : m::kDecodeManySplits)
    if (r.automatic)
      CHECK(flashlab::gpu::decode::auto_splits(8, 8, 4, 1, 131072, /*paged=*/false,
                                               flashlab::sim::find_profile("h200").sm_count) ==
            r.splits);
}

TEST_CASE("lesson 10: the queue grid, its count model worked by hand and its measured rows") {
  namespace m = flashlab::app::measured;
  namespace dk = flashlab::gpu::decode;
  const std::string out = lesson_output(10);
  // 64 sequences of 2048 tiles on 264 slots. The split grid: 256 blocks of 512 tiles, one
  // each, so the busiest slot holds 512 against a mean of 64 x 2048 / 264: 1.031.
  CHECK(contains(out, "the split grid's 256 equal blocks on 264 slots 1.031"));
  // 8 pieces: 480, 416, 352, 288, 224, 160, 96 and 32 tiles (15 : 13 : ... : 1 of 32),
  // piece-major, 64 of each. The first 264 items fill the slots (64 each of 480 .. 288, 8 of
  // 224); the other 56 of 224 go to the 8 slots free at 224 (-> 448) and 48 of those free at
  // 288 (-> 512); the 64 of 160 to the 16 left at 288 (-> 448) and 48 at 352 (-> 512); the
  // 64 of 96 to the 16 left at 352 (-> 448) and 48 at 416 (-> 512); the 64 of 32 to the 16
  // left at 416, 40 at 448 and 8 at 480 (-> 512). The busiest slot: 512, the mean 496.5.
  CHECK(dk::piece_first_tile(2048, 8, 1) == 480);
  CHECK(dk::piece_first_tile(2048, 8, 8) - dk::piece_first_tile(2048, 8, 7) == 32);
  CHECK(contains(out, fmt::format("8\t512\t{:.3f}\t", 512.0 * 264 / (64 * 2048))));
  for (const auto& r : m::kDecodeQueue) {
    CAPTURE(r.pieces);
    CHECK(contains(out, fmt::format("{}{}\t{}\t", r.automatic ? "auto: " : "", r.pieces,
                                    64 * r.pieces)));
    CHECK(
        contains(out, fmt::format("\t{:.2f}\t{:.3f}", r.tbps, r.tbps / m::kDecodeQueueSplitGrid)));
    if (r.automatic) CHECK(dk::auto_pieces(m::kDecodeQueueLength) == r.pieces);
  }
  CHECK(contains(out, fmt::format("loop ran at {:.3f} of the split grid",
                                  m::kDecodeQueueEqualPieces / m::kDecodeQueueEqualSplitGrid)));
}

namespace {

// The TB/s a `decode_splits.py` line of a bench/results text file gives `name` at (B, L):
// lines "B L auto S name:TB/s ... | clean name:TB/s ...", the figure before the "|" (by
// do_bench). Fails the test where the file, the line or the name is missing.
double decode_splits_figure(const std::string& file, std::int64_t batch, std::int64_t length,
                            const std::string& name) {
  const auto path = std::filesystem::path(FLASHLAB_RESULTS_DIR) / file;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, path.string());
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('|')));
    std::int64_t b = 0, l = 0;
    if (!(words >> b >> l) || b != batch || l != length) continue;
    for (std::string word; words >> word;)
      if (word.rfind(name + ":", 0) == 0) return std::stod(word.substr(name.size() + 1));
  }
  FAIL("no ", name, " at B = ", batch, ", L = ", length, " in ", path.string());
  return 0;
}

}  // namespace

TEST_CASE("lesson 10: a lone split and the combine's one group, as stored in bench/results") {
  namespace m = flashlab::app::measured;
  const std::string out = lesson_output(10);
  // B = 32, L = 4096 by hand: 3.96 / 3.90 = 1.015.
  CHECK(contains(out, "32\t4096\t3.96\t3.90\t1.015"));
  for (const auto& r : m::kDecodeLoneSplit) {
    CAPTURE(r.batch);
    CAPTURE(r.length);
    const std::string file = "2026-12-04-h200-decode-lone-split-b32-b64.txt";
    CHECK(r.ends_rows == decode_splits_figure(file, r.batch, r.length, "auto"));
    CHECK(r.through_combine == decode_splits_figure(file, r.batch, r.length, "base"));
    CHECK(contains(out, fmt::format("{}\t{}\t{:.2f}\t{:.2f}\t{:.3f}", r.batch, r.length,
                                    r.ends_rows, r.through_combine,
                                    r.ends_rows / r.through_combine)));
    CHECK(r.ends_rows >= r.through_combine);  // the source's finding: never slower
  }
  for (const auto& r : m::kDecodeCombineGroups) {
    CAPTURE(r.length);
    const std::string file = "2026-12-04-h200-decode-one-group-rule-b1.txt";
    CHECK(r.one_group == decode_splits_figure(file, 1, r.length, "auto"));
    CHECK(r.two_groups == decode_splits_figure(file, 1, r.length, "base"));
    CHECK(r.cudnn == decode_splits_figure(file, 1, r.length, "cudnn"));
    CHECK(contains(out, fmt::format("{}\t{:.2f}\t{:.2f}\t{:.3f}\t{:.2f}", r.length, r.one_group,
                                    r.two_groups, r.one_group / r.two_groups, r.cudnn)));
    CHECK(r.one_group > r.two_groups);
  }
  // The counts the table names are the rule's: 16 splits at B = 1 (GQA 32 / 8), where two
  // blocks an SM would take 32, and one split at B = 32 (and, on a contiguous cache, B = 16).
  const auto sms = flashlab::sim::find_profile("h200").sm_count;
  CHECK(gpu::decode::auto_splits(1, 8, 4, 1, 32768, false, sms) ==
        gpu::decode::kCombineSplitsInFlight);
  CHECK(gpu::decode::fewest_filling_splits(8, sms * gpu::decode::kBlocksPerSm,
                                           gpu::decode::kMaxSplits) == 32);
  CHECK(gpu::decode::auto_splits(32, 8, 4, 1, 4096, false, sms) == 1);
  CHECK(gpu::decode::split_kernel_ends_rows(1, false));
}

TEST_CASE("lesson 10: the split counts it names are the rule's, at every batch it names") {
  namespace dk = flashlab::gpu::decode;
  namespace m = flashlab::app::measured;
  const std::string out = lesson_output(10);
  const auto sms = flashlab::sim::find_profile("h200").sm_count;
  const std::int64_t length = m::kDecodeCombineGroups.back().length;
  // At B = 1 (8 KV heads, 4 query heads each: 8 blocks a split) two blocks an SM would take 32
  // splits, 256 blocks, and the rule takes 16; at B = 2 the wave alone takes 16.
  CHECK(dk::split_cap(length) == dk::kMaxSplits);
  CHECK(dk::split_cap(1) == 1);
  CHECK(dk::split_cap(dk::kMinKeysPerSplit + 1) == 2);
  CHECK(dk::fewest_filling_splits(8, sms * dk::kBlocksPerSm, dk::split_cap(length)) == 32);
  CHECK(dk::fewest_filling_splits(16, sms * dk::kBlocksPerSm, dk::split_cap(length)) == 16);
  CHECK(contains(out, "for 32 splits (256 blocks, 2 an SM); 16 fill one block an SM"));
  CHECK(contains(out, "16 splits (one group)\t32 splits (two)"));
  CHECK(contains(out, "the wave rule takes 16 splits, one group already"));
  CHECK(dk::min_wave_share_percent() == 95);
  CHECK(contains(out, "fills\n95% of the SMs"));
}

namespace {

// The decode table of docs/ANCHORS.md: its rows "| L | flash TB/s | cudnn TB/s | ... |".
std::vector<std::array<double, 3>> anchors_decode_rows() {
  const auto path = std::filesystem::path(FLASHLAB_DOCS_DIR) / "ANCHORS.md";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, path.string());
  std::vector<std::array<double, 3>> rows;
  bool in_decode = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_decode = line.find("Decode") != std::string::npos;
    if (!in_decode || line.rfind("| ", 0) != 0) continue;
    std::istringstream cells(line);
    std::string bar, unit;
    double length = 0, flash = 0, cudnn = 0;
    if (!(cells >> bar >> length)) continue;  // the header and the rule under it
    const bool read = bool(cells >> bar >> flash >> unit >> bar >> cudnn);
    REQUIRE_MESSAGE(read, line);
    rows.push_back({length, flash, cudnn});
  }
  return rows;
}

}  // namespace

TEST_CASE("lesson 10: ANCHORS.md's decode figures, written once, as docs/ANCHORS.md has them") {
  namespace m = flashlab::app::measured;
  const auto rows = anchors_decode_rows();
  REQUIRE(rows.size() == m::kAnchorDecode.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    CHECK(double(m::kAnchorDecode[i].length) == rows[i][0]);
    CHECK(m::kAnchorDecode[i].flash == rows[i][1]);
    CHECK(m::kAnchorDecode[i].cudnn == rows[i][2]);
  }
  CHECK(m::anchor_decode(32768).cudnn == rows[1][2]);
  CHECK_THROWS_AS(m::anchor_decode(1000), std::logic_error);
  CHECK(m::decode_contiguous(131072) == m::kDecodePaged.back().contiguous);
  CHECK_THROWS_AS(m::decode_contiguous(1000), std::logic_error);
  // The lesson quotes them from there, beside the copy's pace the H200 profile holds.
  const std::string out = lesson_output(10);
  const auto& last = m::kAnchorDecode.back();
  CHECK(contains(out, fmt::format("torch's flash decode read {:.2f} TB/s and\ncuDNN's {:.2f}",
                                  last.flash, last.cudnn)));
  CHECK(contains(out, fmt::format("bytes / {:.2f} TB/s",
                                  flashlab::sim::find_profile("h200").hbm_bytes_per_s / 1e12)));
}

TEST_CASE("lesson 10: where the splits merge, the combine kernel or the last block, measured") {
  namespace m = flashlab::app::measured;
  const std::string out = lesson_output(10);
  // L = 4096 by hand: the combine kernel 3.32 in both runs, the last block 3.12 and 3.16, a
  // mean of 3.14: 3.14 / 3.32 = 0.946.
  CHECK(contains(out, "4096\t3.32\t3.14\t0.946"));
  for (const auto& r : m::kDecodeMergeWhere) {
    CAPTURE(r.length);
    const double combine = (r.combine_kernel[0] + r.combine_kernel[1]) / 2;
    const double last = (r.last_block[0] + r.last_block[1]) / 2;
    CHECK(contains(out, fmt::format("{}\t{:.2f}\t{:.2f}\t{:.3f}", r.length, combine, last,
                                    last / combine)));
    CHECK(last < combine);  // the source's finding: the folded merge is the slower everywhere
  }
}

namespace {

// Column `value` (dram_read_measured by default) of the backward's row (heads, kv_heads, N)
// in a stored CSV of bench/results (`flashlab compare --pass backward --sweep`, or
// backward_grid_vs_measured.py's, which has these columns too and a mode: its atomic rows).
double backward_dram_read(const std::string& file, std::int64_t heads, std::int64_t kv_heads,
                          std::int64_t n, const std::string& value = "dram_read_measured") {
  const auto path = std::filesystem::path(FLASHLAB_RESULTS_DIR) / file;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, path.string());
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::istringstream h(line); std::getline(h, line, ',');) header.push_back(line);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE_MESSAGE(it != header.end(), "no column ", name, " in ", path.string());
    return std::size_t(it - header.begin());
  };
  const std::size_t c_heads = column("heads"), c_kv = column("kv_heads"), c_n = column("N"),
                    c_read = column(value);
  const bool has_mode = std::find(header.begin(), header.end(), "mode") != header.end();
  const std::size_t c_mode = has_mode ? column("mode") : 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    for (std::istringstream r(line); std::getline(r, line, ',');) cells.push_back(line);
    if (has_mode && cells[c_mode] != "atomic") continue;
    if (std::stoll(cells[c_heads]) == heads && std::stoll(cells[c_kv]) == kv_heads &&
        std::stoll(cells[c_n]) == n)
      return std::stod(cells[c_read]);
  }
  FAIL("no row ", heads, " / ", kv_heads, " heads, N = ", n, " in ", path.string());
  return 0;
}

}  // namespace

TEST_CASE("lesson 6: the backward's DRAM reads against the floor, as stored in bench/results") {
  namespace m = flashlab::app::measured;
  const std::string out = lesson_output(6);
  CHECK(contains(out, "Where the re-reads stop hitting in the L2, measured"));
  // 16 / 4 heads at N = 16,384 by hand: the floor is Q, dO (64 MiB each), K, V (16 each), L,
  // D (1 each) and the accumulator (128) for the main kernel, O and dO for the pre-kernel and
  // the accumulator for the post-kernel: 290 + 128 + 128 = 546 MiB; measured 1,278,443,008
  // bytes, 1,219.2 MiB: 2.233.
  // The grid model's stored prediction, 1,245,193,216 bytes (1.2 GiB): 1.027.
  CHECK(contains(out, "16 / 4\t16384\t546.0 MiB\t1.2 GiB\t1.2 GiB\t2.233\t1.027"));
  const flashlab::sim::HardwareProfile& h200 = flashlab::sim::find_profile("h200");
  for (const m::BackwardDramRead& r : m::kBackwardDramRead) {
    CAPTURE(r.heads_q);
    CAPTURE(r.heads_kv);
    CAPTURE(r.n);
    const std::string file = r.heads_kv != r.heads_q ? "backward-gqa"
                             : r.n > 16384          ? "backward-long"
                                                    : "backward-causal";
    CHECK(r.read_bytes == backward_dram_read("2026-12-04-h200-compare-pass-sweep-" + file + ".csv",
                                             r.heads_q, r.heads_kv, r.n));
    // The grid model's, as the script wrote it.
    CHECK(r.grid_bytes == backward_dram_read("2026-12-04-backward-grid-vs-h200.csv", r.heads_q,
                                             r.heads_kv, r.n, "read_grid"));
    CHECK(contains(out, fmt::format("{} / {}\t{}\t", r.heads_q, r.heads_kv, r.n)));
    if (r.n > 4096) continue;  // the model runs the short rows again here (seconds each)
    const BackwardRun run{
        .heads = r.heads_q, .kv_heads = r.heads_kv, .n = r.n, .d = 128, .causal = true};
    const auto launches = flashlab::sim::predicted_dram(*predict(run).report, h200);
    REQUIRE(launches);
    CHECK(double(flashlab::sim::total(*launches).read) == r.grid_bytes);
  }
  // The step by hand: 64 x 128 x (2 + 2 + 4) + 2 x 64 x 4 = 66,048 bytes, 64.5 KiB. The
  // second wave's lag at N = 65,536: Tr = 1,024 query tiles less 2 x (2 x 132 - 1) = 498
  // tiles, 32,891,904 bytes (31.4 MiB), over a partition's 30 MiB; at 32,768, 512 - 526.
  CHECK(contains(out, "moves 64.5 KiB for one query head"));
  CHECK(contains(out, "498 steps after block 0"));
  CHECK(contains(out, "498 tiles, 31.4 MiB, more than a\npartition's 30.0 MiB"));
  CHECK(contains(out, "at N = 32768, -14: the second wave runs ahead"));
  // The GQA row in LRU partitions: its grid reads 1.018 of the floor (the sets, 2.18).
  CHECK(contains(out, "With 4 query heads over each KV head the live tiles at N = 16384"));
  CHECK(contains(out, "1.018 of the floor"));
}

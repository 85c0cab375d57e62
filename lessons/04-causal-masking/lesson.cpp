// Lesson 4: causal masking, tile by tile: skipped tiles, the diagonal, wholly masked rows,
// and rows that see no key at all.
#include "04-causal-masking/book_data.hpp"
#include "gpu_bridge/gpu_runner.hpp"
#include "gpu_bridge/kernels.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"
#include "traces/trace_print.hpp"

#include "flashlab/cpu/forward.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <array>
#include <string>

namespace flashlab::app {

namespace {

constexpr Index kN = 24, kD = 4, kTile = 4;
constexpr std::uint64_t kSeed = 0;

TraceSetup causal_setup(Index Br, Index Bc) {
  return {.N = kN, .d = kD, .tiles = {Br, Bc}, .causal = cpu::Causal::top_left, .seed = kSeed};
}

char mark(cpu::TileKind kind) {
  switch (kind) {
    case cpu::TileKind::full: return 'F';
    case cpu::TileKind::partial: return 'D';
    case cpu::TileKind::skipped: return '.';
  }
  return '?';
}

void tile_map(LessonContext& ctx) {
  ctx.step("Which tiles a causal mask touches");
  ctx.print("A causal model lets query i see keys j <= i only. Cut the {} x {} score matrix into\n"
            "{} x {} tiles and each tile is one of three kinds:\n"
            "  F  full: every pair allowed, computed with no masking work\n"
            "  D  on the diagonal: computed, the future scores set to -inf on chip\n"
            "  .  wholly in the future: never computed, K_j and V_j never loaded\n\n",
            kN, kN, kTile, kTile);
  const cpu::Mask mask{cpu::Causal::top_left, kN, kN};
  std::string map = "        KV tile j: ";
  for (Index j = 0; j < kN / kTile; ++j) map += fmt::format("{} ", j);
  map += '\n';
  for (Index i = 0; i < kN / kTile; ++i) {
    map += fmt::format("  query tile {}:     ", i);
    for (Index j = 0; j < kN / kTile; ++j) map += fmt::format("{} ", mark(mask.classify(i * kTile, kTile, j * kTile, kTile)));
    map += '\n';
  }
  ctx.say(map + "\n");
  const auto trace = trace_random(causal_setup(kTile, kTile));
  ctx.print("The forward pass agrees: {} tiles computed ({} of them diagonal), {} skipped, out\n"
            "of {}. At large N the skipped share tends to one half.\n\n",
            trace.counts.computed, trace.counts.partial, trace.counts.skipped, trace.counts.total());
}

void diagonal(LessonContext& ctx) {
  ctx.step("A diagonal tile, and rows that skip a tile");
  const auto trace = trace_random(causal_setup(2 * kTile, kTile));
  constexpr Index kTileJ = 1;  // the KV tile just past the first kTile query rows
  ctx.print(
      "With Br = {} and Bc = {} the diagonal cuts tiles unevenly: query rows {} see no key\n"
      "of KV tile {} (keys {}) at all. Their scores in that tile are all -inf, and the\n"
      "update must skip them: exp(S - m') would be exp(-inf - (-inf)) = NaN for a row that\n"
      "had seen nothing, and is pointless for one that had. rowmax(S) shows -inf there.\n"
      "(As in every trace, {}.)\n\n",
      2 * kTile, kTile, index_range(0, kTile), kTileJ, index_range(kTileJ * kTile, kTile),
      kNumbering);
  print_query_tile(ctx.out(), ctx.style(), trace, 0);
}

// Rows that see no key: with N_q > N_k and bottom-right alignment, the first N_q - N_k
// query rows lie before every key.
void no_key_rows(LessonContext& ctx) {
  ctx.step("Rows with no valid key at all");
  constexpr Index kQueries = 6, kKeys = 4;
  const auto in = random_inputs({.N = kQueries, .d = kD, .seed = kSeed});
  cpu::AttentionOptions options;
  options.causal = cpu::Causal::bottom_right;
  options.tiles = {2, 2};
  const cpu::Matrix<float> K = in.K.topRows(kKeys), V = in.V.topRows(kKeys);
  const auto r = cpu::forward_q_outer<float>(in.Q, K, V, options);
  ctx.print("N_q = {} queries against N_k = {} keys, causal aligned bottom-right (the last query\n"
            "sees every key, as when decoding against a cache): query i sees keys\n"
            "j <= i + (N_k - N_q), so the first {} queries see none. For them U / l would be\n"
            "0 / 0. flashlab's convention: O = 0 and L = -inf.\n\n",
            kQueries, kKeys, kQueries - kKeys);
  Table t({"query", "keys it sees", "O row", "L"});
  for (Index q = 0; q < kQueries; ++q) {
    const Index last = q + kKeys - kQueries;
    const auto O_q = r.O.row(q);  // one block object: its begin() and end() must match
    t.add({fmt::format("{}", q), last < 0 ? "none" : index_range(0, last + 1),
           num_row(std::vector<double>(O_q.begin(), O_q.end())), num(r.L[q])});
  }
  ctx.table(t);
}

void work_saved(LessonContext& ctx) {
  ctx.step("What skipping saves at scale");
  constexpr Index kBigN = 8192, kBigD = 128;
  Table t({"causal", "tiles computed", "tiles skipped", "matrix FLOPs", "HBM bytes"}, {true});
  cpu::TileSizes tiles{};
  for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
    const sim::Problem p{.N = kBigN,
                         .d = kBigD,
                         .dtype = sim::DType::bf16,
                         .causal = causal,
                         .sram_bytes = target_profile().sram_per_sm};
    const auto r = sim::count(sim::Algorithm::fa2, fa2_kernel_problem(p));
    tiles = r.tiles->tiles;
    t.add({std::string(cpu::to_string(causal)), fmt::format("{}", r.tile_counts.computed),
           fmt::format("{}", r.tile_counts.skipped), num(double(r.ops.matrix_flops), 4),
           num(double(r.bytes_total()), 4)});
  }
  ctx.print(
      "The simulator's FlashAttention-2 at N = {}, d = {}, bf16, with the SRAM of one H200\n"
      "block ({}) and the tiles of flashlab's fa2 kernel (from gpu/'s kernel table):\n"
      "Br = {}, Bc = {}, so Tr = {} query tiles by Tc = {} KV tiles.\n\n",
      kBigN, kBigD, sim::format_bytes(double(target_profile().sram_per_sm)), tiles.Br, tiles.Bc,
      cpu::tile_count(kBigN, tiles.Br), cpu::tile_count(kBigN, tiles.Bc));
  ctx.table(t);
  ctx.say("Roughly half the tiles, half the FLOPs and half the K, V traffic disappear; the\n"
          "mask itself costs nothing in memory (no N x N mask is ever stored).\n\n");
}

// Half the work is not half the time: fa2 and the naive kernel timed with and without the
// mask, with one head and with many. One block per query tile: with one head every block is
// resident at once and the time is the longest block's (the last query tile reads every key);
// with many heads the SMs take waiting blocks as others finish, and time follows work.
constexpr Index kGpuN = 4096, kGpuD = 128;
constexpr std::array<Index, 2> kGpuHeads{1, 16};
constexpr int kGpuWarmups = 2, kGpuRepeats = 10;

void causal_on_gpu(LessonContext& ctx) {
  ctx.step("On a GPU: half the work, and the time");
  const sim::Problem problem{.N = kGpuN,
                             .d = kGpuD,
                             .dtype = sim::DType::bf16,
                             .sram_bytes = target_profile().sram_per_sm};
  const KernelMirror fa2 = kernel_mirror("fa2", problem);
  const Index br = fa2.problem.tiles->Br;
  const Index tiles = cpu::tile_count(kGpuN, br);
  const Index slots = fa2.blocks_per_sm * target_profile().sm_count;
  const double work = double(tiles + 1) / double(2 * tiles);  // causal share of query-tile rows
  const GpuStatus status = gpu_status();
  if (!status.available) {
    ctx.print(
        "No GPU here: {}.\nWith one, this step times fa2 and the naive kernel at N = {}, d = {},\n"
        "bf16, without and with the causal mask, for {} and {} heads. fa2 launches one block per\n"
        "query tile of Br = {} rows ({} a head) and skips the future tiles: {:.2f} of the work\n"
        "is left. With one head all {} blocks run at once ({} places: {} SMs x {}), so the time\n"
        "is the longest block's, and the last query tile reads every key: the time barely\n"
        "moves. With {} heads there are more blocks than places, finished blocks make room\n"
        "for waiting ones, and the time moves toward the work. The naive kernel's two GEMMs\n"
        "compute every score and every product, masked or not; only its softmax reads fewer\n"
        "scores.\n\n",
        status.description, kGpuN, kGpuD, kGpuHeads[0], kGpuHeads[1], br, tiles, work, tiles, slots,
        target_profile().sm_count, fa2.blocks_per_sm, kGpuHeads[1]);
    return;
  }
  const auto in = random_inputs({.N = kGpuN, .d = kGpuD, .seed = kSeed});
  const cpu::Matrix<float> Q = in.Q.cast<cpu::bf16>().cast<float>(),
                           K = in.K.cast<cpu::bf16>().cast<float>(),
                           V = in.V.cast<cpu::bf16>().cast<float>();
  ctx.print(
      "{}: N = {}, d = {}, bf16, batch 1. fa2 has one block per query tile of Br = {}\n"
      "rows ({} a head, {} places at once: {} SMs x {}); causal, {:.3f} of the work is left.\n\n",
      status.description, kGpuN, kGpuD, br, tiles, slots, target_profile().sm_count,
      fa2.blocks_per_sm, work);
  Table t({"kernel", "heads", "no mask", "causal", "causal / no mask"}, {true});
  std::array<double, kGpuHeads.size()> fa2_ratio{};
  for (const std::string kernel : {"fa2", "naive"}) {
    for (std::size_t h = 0; h < kGpuHeads.size(); ++h) {
      std::array<double, 2> ms{};
      std::string why_not;
      for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
        const auto run = run_gpu_forward(kernel, Q, K, V, sim::DType::bf16, causal, kGpuWarmups,
                                         kGpuRepeats, kGpuHeads[h]);
        if (!run.ran) why_not = run.message;
        ms[causal == cpu::Causal::none ? 0 : 1] = run.median_ms;
      }
      if (!why_not.empty()) {
        t.add({kernel, fmt::format("{}", kGpuHeads[h]), "not run: " + why_not, "-", "-"});
        continue;
      }
      if (kernel == "fa2") fa2_ratio[h] = ms[1] / ms[0];
      t.add({kernel, fmt::format("{}", kGpuHeads[h]), fmt::format("{:.1f} us", ms[0] * 1e3),
             fmt::format("{:.1f} us", ms[1] * 1e3), fmt::format("{:.2f}", ms[1] / ms[0])});
    }
  }
  ctx.table(t);
  ctx.print(
      "fa2 with one head: {:.2f} of the unmasked time for {:.2f} of the work. All {} blocks run\n"
      "at once, so the time is the longest block's, and the last query tile reads every key.\n"
      "With {} heads ({} blocks for {} places) finished blocks make room for waiting ones and\n"
      "the time moves toward the work: {:.2f}. Skipping saves time only when there is other\n"
      "work to fill the SMs it frees (lesson 12: the grid and the waves; FlashAttention-3's\n"
      "scheduler starts the longest tiles first). The naive kernel's two GEMMs compute every score and\n"
      "every product, masked or not; only its softmax reads fewer scores.\n"
      "Bytes, predicted and measured: `flashlab compare --n {} --d {} --causal`.\n\n",
      fa2_ratio[0], work, tiles, kGpuHeads[1], kGpuHeads[1] * tiles, slots, fa2_ratio[1], kGpuN,
      kGpuD);
}

}  // namespace

void run_lesson_04(LessonContext& ctx) {
  tile_map(ctx);
  diagonal(ctx);
  no_key_rows(ctx);
  work_saved(ctx);
  causal_on_gpu(ctx);
  ctx.finish("lesson 5 counts the bytes of naive, FA1 and FA2 over a sweep of N, d and M.");
}

TraceSetup causal_viewer_setup() { return causal_setup(kTile, kTile); }

}  // namespace flashlab::app

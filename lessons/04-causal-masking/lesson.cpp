// Lesson 4: causal masking, tile by tile: skipped tiles, the diagonal, wholly masked rows,
// and rows that see no key at all.
#include "04-causal-masking/book_data.hpp"
#include "gpu_bridge/gpu_step.hpp"
#include "gpu_bridge/kernels.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"
#include "traces/trace_print.hpp"

#include "flashlab/cpu/forward.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

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

}  // namespace

void run_lesson_04(LessonContext& ctx) {
  tile_map(ctx);
  diagonal(ctx);
  no_key_rows(ctx);
  work_saved(ctx);
  gpu_side_by_side(ctx, {.N = 4096, .d = 128, .causal = cpu::Causal::top_left, .kernels = {"naive", "fa2"},
                         .what_it_shows = "Compare the time with a run without --causal: a kernel that "
                                          "skips the future tiles takes about half as long; one that "
                                          "only masks them takes as long as without the mask."});
  ctx.finish("lesson 5 counts the bytes of naive, FA1 and FA2 over a sweep of N, d and M.");
}

TraceSetup causal_viewer_setup() { return causal_setup(kTile, kTile); }

}  // namespace flashlab::app

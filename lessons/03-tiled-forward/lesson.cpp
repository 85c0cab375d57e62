// Lesson 3: the tiled forward pass on a 24-token example, tile by tile.
#include "03-tiled-forward/book_data.hpp"
#include "gpu_bridge/gpu_step.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"
#include "traces/trace_print.hpp"

#include "flashlab/cpu/naive.hpp"
#include "flashlab/sim/simulate.hpp"

namespace flashlab::app {

namespace {

constexpr Index kN = 24, kD = 4, kBr = 4;
constexpr std::uint64_t kSeed = 0;

TraceSetup setup_with(Index Bc, Index Br = kBr) {
  return {.N = kN, .d = kD, .tiles = {Br, Bc}, .seed = kSeed};
}

void the_loop(LessonContext& ctx) {
  ctx.step("The loop");
  ctx.say("FlashAttention-2 cuts Q into query tiles Q_i of Br rows and K, V into KV tiles of\n"
          "Bc rows. Each query tile keeps its state (m, l, U) on chip and sweeps every KV tile:\n\n"
          "  for each query tile Q_i:               (independent: one thread block each)\n"
          "    load Q_i;  m = -inf, l = 0, U = 0\n"
          "    for each KV tile K_j, V_j:\n"
          "      load K_j, V_j;  S = Q_i K_j^T / sqrt(d)          (Br, Bc), on chip only\n"
          "      m' = max(m, rowmax S);  alpha = exp(m - m');  W = exp(S - m')\n"
          "      l = alpha l + rowsum W;  U = alpha U + W V_j;  m = m'\n"
          "    O_i = U / l;  L_i = m + log l;  store O_i, L_i\n\n");
  const auto tiles = cpu::tile_count;  // ceil(n / block)
  const Index Tr = tiles(kN, kBr);
  ctx.print(
      "The example: N = {} tokens, d = {}, Br = {}, so Tr = {} query tiles. With Bc = 4\n"
      "there are Tc = {} KV tiles and {} score tiles of 4 x 4; with Bc = 8, Tc = {} and {}.\n"
      "Numbering, as in every trace: {}.\n\n",
      kN, kD, kBr, Tr, tiles(kN, 4), Tr * tiles(kN, 4), tiles(kN, 8), Tr * tiles(kN, 8),
      kNumbering);
}

void sweep(LessonContext& ctx, Index Bc) {
  ctx.step(fmt::format("Query tile 0 sweeps the KV tiles, Bc = {}", Bc));
  const auto trace = trace_random(setup_with(Bc));
  print_query_tile(ctx.out(), ctx.style(), trace, 0);
  ctx.say("Read a row down the table: m only grows; alpha < 1 exactly when it grew; l and U\n"
          "are rescaled by alpha before the tile's weights join them. Nothing is divided\n"
          "until the sweep ends.\n\n");
}

void same_answer(LessonContext& ctx) {
  ctx.step("Every tiling gives the same O");
  const auto in = random_inputs(setup_with(4));
  const auto exact = cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(),
                                                  in.V.cast<double>());
  Table t({"Br", "Bc", "score tiles", "max |O - O_fp64|", "max |L - L_fp64|"});
  for (const auto& [Br, Bc] : {std::pair<Index, Index>{4, 4}, {4, 8}, {8, 4}, {24, 24}, {5, 7}}) {
    const auto trace = trace_random(setup_with(Bc, Br));
    double err_O = 0, err_L = 0;
    for (const auto& q : trace.query_tiles)
      for (Index r = 0; r < q.rows; ++r) {
        err_O = std::max(err_O, (q.O.row(r) - exact.O.row(q.q0 + r)).cwiseAbs().maxCoeff());
        err_L = std::max(err_L, std::abs(q.L[r] - exact.L[q.q0 + r]));
      }
    t.add({fmt::format("{}", Br), fmt::format("{}", Bc), fmt::format("{}", trace.counts.computed),
           num(err_O, 3), num(err_L, 3)});
  }
  ctx.table(t);
  ctx.say("The tiled pass runs in fp32 and is compared with naive attention in fp64: the\n"
          "differences are fp32 rounding, for every tile shape, ragged ones (5 x 7) included.\n\n");
}

void bytes_moved(LessonContext& ctx) {
  ctx.step("What this run moved between HBM and SRAM");
  ctx.say("The simulator runs the same loop on the same inputs, counting each load and store\n"
          "(fp32, 4 bytes an element). Q is read once, K and V once per query tile:\n\n");
  const auto in = random_inputs(setup_with(4));
  Table t({"Br", "Bc", "Q read", "K read", "V read", "O written", "L written", "total"});
  for (const auto& [Br, Bc] : {std::pair<Index, Index>{4, 4}, {4, 8}, {8, 4}, {24, 24}}) {
    const sim::Problem p{.N = kN, .d = kD, .dtype = sim::DType::fp32,
                         .tiles = cpu::TileSizes{Br, Bc}};
    const auto r = sim::simulate<float>(sim::Algorithm::fa2, p, in.Q, in.K, in.V).report;
    const auto b = [&](std::string_view name, bool read) {
      return fmt::format("{}", read ? r.tensor(name).read : r.tensor(name).written);
    };
    t.add({fmt::format("{}", Br), fmt::format("{}", Bc), b("Q", true), b("K", true), b("V", true),
           b("O", false), b("L", false), fmt::format("{}", r.bytes_total())});
  }
  ctx.table(t);
  ctx.print("K and V cost N d 4 bytes = {} B per sweep, and there are Tr = N / Br sweeps: Bc\n"
            "changes how many steps a sweep takes, not what it reads; Br decides how often K and\n"
            "V are read again. Bigger tiles need more SRAM: that trade is lesson 5.\n\n",
            kN * kD * 4);
}

}  // namespace

void run_lesson_03(LessonContext& ctx) {
  the_loop(ctx);
  sweep(ctx, 4);
  sweep(ctx, 8);
  same_answer(ctx);
  bytes_moved(ctx);
  gpu_side_by_side(ctx, {.N = 4096, .d = 128, .kernels = {"scalar", "fa2"},
                         .what_it_shows = "The scalar kernel is this lesson's loop with one GPU thread "
                                          "per query row; fa2 is the same loop on tensor cores."});
  ctx.finish("lesson 4 adds the causal mask: which tiles can be skipped outright.");
}

TraceSetup tiled_forward_viewer_setup() { return setup_with(4); }

}  // namespace flashlab::app

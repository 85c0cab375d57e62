// Lesson 8: FlashAttention-3's pipeline on Hopper, as a timeline model: the same tasks per
// KV tile (load, S = Q K^T, softmax, P V) arranged four ways, and the time each predicts.
#include "kit/lesson_context.hpp"
#include "timeline.hpp"

#include "flashlab/sim/profiles.hpp"

namespace flashlab::app {

namespace {

namespace tl = timeline;
using cpu::Index;
constexpr Index kBr = 128, kBc = 128, kD = 128;  // one warpgroup's query tile, a KV tile, d
constexpr double kBf16 = 2;
constexpr Index kTiles = 64;                     // KV tiles swept: N = 8192 keys
constexpr Index kDrawnTiles = 4;
constexpr int kDrawWidth = 96;

tl::StageTimes stage_times(const sim::HardwareProfile& p) {
  const double per_sm = 1.0 / p.sm_count;  // one thread block per SM, sharing the chip evenly
  return {.load = 2 * kBc * kD * kBf16 / (p.hbm_bytes_per_s * per_sm),
          .mma = 2.0 * kBr * kBc * kD / (p.matrix_flops_per_s * per_sm),
          .softmax = double(kBr * kBc) / (p.exp_per_s * per_sm)};
}

void stages(LessonContext& ctx, const tl::StageTimes& t, const sim::HardwareProfile& p) {
  ctx.step("One KV tile, four tasks, three units");
  ctx.print("Per KV tile, one SM of an H200 (the simulator's profile, shared evenly by {} SMs),\n"
            "Br = {} query rows, Bc = {} keys, d = {}, bf16:\n\n", p.sm_count, kBr, kBc, kD);
  Table table({"task", "unit", "work", "time"}, {true, true, true});
  const auto us = [](double s) { return fmt::format("{:.2f} us", s * 1e6); };
  table.add({"L  load K_j, V_j", "copy (TMA)", fmt::format("{} bytes", 2 * kBc * kD * 2), us(t.load)});
  table.add({"S  S = Q_i K_j^T", "tensor cores", fmt::format("{} FLOPs", 2 * kBr * kBc * kD), us(t.mma)});
  table.add({"E  softmax", "exp unit", fmt::format("{} exps", kBr * kBc), us(t.softmax)});
  table.add({"P  U += W V_j", "tensor cores", fmt::format("{} FLOPs", 2 * kBr * kBc * kD), us(t.mma)});
  ctx.table(table);
  ctx.say("The load uses the SM's share of HBM bandwidth: pessimistic, since most repeated\n"
          "K, V reads hit the L2 (lesson 5). The softmax is cheap in FLOPs but runs on a unit\n"
          "with a tiny fraction of the tensor cores' throughput.\n\n");
}

void arrangements(LessonContext& ctx, const tl::StageTimes& t, const sim::HardwareProfile& p) {
  ctx.step("Four arrangements of the same tasks");
  ctx.say("  sequential        one warpgroup; each task waits for the previous one\n"
          "  loads overlapped  a producer warp loads the next K, V into a second buffer\n"
          "  intra overlap     one warpgroup issues S_{j+1} before softmax_j, so they overlap\n"
          "  ping-pong         two warpgroups with two query tiles share each K_j, V_j; the\n"
          "                    tensor cores alternate, one's softmax hides under the other's GEMMs\n\n");
  Table table({"arrangement", "buffers", "time per query tile", "tensor cores busy",
               "exp unit busy", "copy busy", "predicted TFLOP/s"}, {true});
  const std::pair<tl::Arrangement, Index> runs[] = {
      {tl::Arrangement::sequential, 1}, {tl::Arrangement::loads_overlapped, 2},
      {tl::Arrangement::intra_overlap, 2}, {tl::Arrangement::intra_overlap, 3},
      {tl::Arrangement::ping_pong, 2}};
  for (const auto& [a, buffers] : runs) {
    auto tasks = tl::schedule(a, t, kTiles, buffers);
    tl::run(tasks);
    const auto s = tl::summarise(tasks);
    const double query_tiles = tl::query_tiles(a);
    const double flops = 4.0 * kBr * kBc * kD * double(kTiles) * query_tiles;  // both products
    const auto pct = [&](tl::Unit u) { return fmt::format("{:.0f}%", 100 * s.busy[int(u)] / s.seconds); };
    table.add({std::string(tl::to_string(a)), fmt::format("{}", buffers),
               fmt::format("{:.1f} us", s.seconds / query_tiles * 1e6), pct(tl::Unit::tensor),
               pct(tl::Unit::exp), pct(tl::Unit::copy),
               fmt::format("{:.0f}", flops / s.seconds * p.sm_count / 1e12)});
  }
  ctx.print("N = {} keys ({} KV tiles) per query tile:\n\n", kTiles * kBc, kTiles);
  ctx.table(table);
  ctx.print("The ceiling is {:.0f} TFLOP/s, the tensor cores' rate. Overlapping the loads takes\n"
            "the copy time off the critical path. Issuing S_(j+1) early keeps tile j+1's buffer\n"
            "busy longer, so with two buffers the loads stall: that arrangement needs a third.\n"
            "Even then one query tile reads K and V alone, and at this bandwidth the loads bind.\n"
            "Ping-pong shares each K_j, V_j between two query tiles, halving the bytes per query\n"
            "tile, and hides the softmax of one under the GEMMs of the other: FlashAttention-3's\n"
            "arrangement, and the only one here that keeps the tensor cores busy.\n\n",
            p.matrix_flops_per_s / 1e12);
}

void pictures(LessonContext& ctx, const tl::StageTimes& t) {
  ctx.step("The timelines");
  const double step = t.mma / 4;  // four characters per GEMM
  ctx.print("The first {} KV tiles; one character = {:.2f} us; upper case: warpgroup 0, lower\n"
            "case: warpgroup 1; '.' idle. L load, S first GEMM, E softmax, P second GEMM.\n\n",
            kDrawnTiles, step * 1e6);
  for (const auto a : {tl::Arrangement::sequential, tl::Arrangement::loads_overlapped,
                       tl::Arrangement::intra_overlap, tl::Arrangement::ping_pong}) {
    auto tasks = tl::schedule(a, t, kDrawnTiles, a == tl::Arrangement::sequential ? 1 : tl::kDoubleBuffer);
    tl::run(tasks);
    ctx.print("{}\n", tl::to_string(a));
    const auto lines = tl::draw(tasks, step, kDrawWidth);
    for (int u = 0; u < tl::kUnits; ++u)
      ctx.print("  {:<13}|{}\n", tl::to_string(tl::Unit(u)), lines[std::size_t(u)]);
    ctx.say("\n");
  }
}

void gpu_counterpart(LessonContext& ctx) {
  ctx.step("On a GPU");
  ctx.say("flashlab's GPU ladder has no FlashAttention-3 kernel (TMA, wgmma, warp specialisation)\n"
          "yet; its FA2 kernel overlaps loads with cp.async double buffering, the second row of\n"
          "the table. ANCHORS.md gives the measured figures to hold the model against: torch's\n"
          "FA2 at 344 TFLOP/s and cuDNN at 612 TFLOP/s (d = 128, N = 8192, H200).\n\n");
}

}  // namespace

void run_lesson_08(LessonContext& ctx) {
  const auto& h200 = sim::find_profile("h200");
  const auto t = stage_times(h200);
  stages(ctx, t, h200);
  arrangements(ctx, t, h200);
  pictures(ctx, t);
  gpu_counterpart(ctx);
  ctx.finish("lesson 9: FlashAttention-4's conditional rescaling.");
}

}  // namespace flashlab::app

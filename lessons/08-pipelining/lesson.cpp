// Lesson 8: FlashAttention-3's pipeline on Hopper, as a timeline model of one block of
// flashlab's Hopper kernel (06_fa3.cu): its tasks per KV tile, its switches one at a time, the
// speed-up the model predicts for each idea beside the one measured on the H200, and one work
// item of the kernel as its pipeline log measured it.
#include "ablation_model.hpp"
#include "kit/lesson_context.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "measured_ablation.hpp"
#include "measured_item.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <string_view>

namespace flashlab::app {

namespace {

namespace tl = timeline;
using cpu::Index;
constexpr Index kDrawnTiles = 4;
constexpr int kDrawWidth = 100;
using lesson08::facts;

void tasks_step(LessonContext& ctx, const tl::StageTimes& t, const sim::HardwareProfile& p,
                double dram_share) {
  const auto& f = facts();
  const auto& m = tl::kMeasuredShape;
  const Index rows = f.Br / f.consumers;
  ctx.step("One block, five tasks per KV tile, three units");
  ctx.print(
      "flashlab's Hopper kernel gives each block Br = {} query rows, held by {} consumer\n"
      "warpgroups of {} rows; KV tiles of Bc = {} keys stream past through rings of K and V\n"
      "buffers. The shape is the measured one: d = {}, N = {}, B = {}, H = {}, bf16. One SM of\n"
      "an H200 (the simulator's profile, shared evenly by {} SMs):\n\n",
      f.Br, f.consumers, rows, f.Bc, m.d, m.N, m.batch, m.heads, p.sm_count);
  Table table({"task", "unit", "work", "time"}, {true, true, true});
  const auto us = [](double s) { return fmt::format("{:.3f} us", s * 1e6); };
  const Index tile_bytes = f.Bc * m.d * 2;
  table.add({"K  load K_j", "copy (TMA)", fmt::format("{} bytes", tile_bytes), us(t.load)});
  table.add({"V  load V_j", "copy (TMA)", fmt::format("{} bytes", tile_bytes), us(t.load)});
  table.add({"S  S = Q K_j^T (one consumer)", "tensor cores",
             fmt::format("{} FLOPs", 2 * rows * f.Bc * m.d), us(t.mma)});
  table.add({"E  softmax (one consumer)", "exp unit", fmt::format("{} exps", rows * f.Bc),
             us(t.softmax)});
  table.add({"P  U += W V_j (one consumer)", "tensor cores",
             fmt::format("{} FLOPs", 2 * rows * f.Bc * m.d), us(t.mma)});
  ctx.table(table);
  ctx.print(
      "Every block of a head reads all of its K and V, but only the first reads of a wave reach\n"
      "DRAM: the grid model of lesson 5 (the H200's {} L2, blocks in waves) finds {:.2f}% of\n"
      "these loads served by DRAM, the rest by the L2. So a load moves at the L2's {:.1f} TB/s\n"
      "share of the SM (the profile's figure), not at HBM's {:.2f} TB/s share, which the\n"
      "DRAM misses alone would need {:.3f} us for.\n\n",
      sim::format_bytes(double(p.l2_bytes)), 100 * dram_share, p.l2_bytes_per_s / 1e12,
      p.hbm_bytes_per_s / 1e12,
      dram_share * double(tile_bytes) / (p.hbm_bytes_per_s / p.sm_count) * 1e6);
}

void ablation_step(LessonContext& ctx, const tl::StageTimes& t, const sim::HardwareProfile& p) {
  ctx.step("Each idea switched off alone: the model beside the H200");
  const auto& m = tl::kMeasuredShape;
  Table table({"switches", "", "model TFLOP/s", "model: default / this", "measured TFLOP/s",
               "measured: default / this"},
              {true, true});
  const double model_default = lesson08::predicted_tflops(tl::kMeasuredAblation[0].switches, t, p);
  const double measured_default = tl::kMeasuredAblation[0].tflops;
  for (const auto& run : tl::kMeasuredAblation) {
    const double model = lesson08::predicted_tflops(run.switches, t, p);
    table.add({std::string(run.name), tl::describe(run.switches), fmt::format("{:.0f}", model),
               fmt::format("{:.3f}", model_default / model), fmt::format("{:.1f}", run.tflops),
               fmt::format("{:.3f}", measured_default / run.tflops)});
  }
  ctx.table(table);
  ctx.print(
      "Measured on the H200: bench/results/{} (bench.py --ablation), run of {}\n(d = {}, N = "
      "{}, B = {}, H = {}, bf16, non-causal). A ratio above 1 is what the idea\nbuys: the "
      "default's speed over the speed without it.\n\n",
      m.csv, m.date, m.d, m.N, m.batch, m.heads);
  const auto& spread = measured::kTimedLater;
  ctx.print(
      "These runs were timed one after the other: cuDNN, the default, then each variant. In a\n"
      "later sweep timed so, the same kernel took up to {:.1f}% longer when it came second or\n"
      "fourth of five than when it came first ({:.1f}% at the median), so a measured ratio\n"
      "within a few percent of 1 is not resolved by this table, and the variants timed last\n"
      "may owe more to their place. (The spread: {}.)\n\n",
      100 * (spread.largest - 1), 100 * (spread.median - 1), spread.source.run);
}

void disagreement_step(LessonContext& ctx, const tl::StageTimes& t, const sim::HardwareProfile& p) {
  ctx.step("Where the model and the H200 disagree, and why");
  const double model_default = lesson08::predicted_tflops(tl::kMeasuredAblation[0].switches, t, p);
  const auto model_gain = [&](std::string_view name) {  // measured_gain, in the model
    return model_default / lesson08::predicted_tflops(tl::measured_run(name).switches, t, p);
  };
  ctx.print(
      "- The level. The model's block keeps the tensor cores busy nearly all the time and\n"
      "  predicts {:.0f} TFLOP/s; the kernel reaches {:.0f}, {:.1f}% below. The gap was wider\n"
      "  once: an earlier build (bench/gpu/NOTES.md, fa3 v2) reached 575, and Nsight Compute\n"
      "  found its tensor pipe active 64% of the time and its issue slots 45% busy, the\n"
      "  consumers' own instructions (the softmax's maxima, sums, scaling and conversions, the\n"
      "  waits around each wgmma) taking time the model does not charge, since its softmax is\n"
      "  its exps alone; before a per-score branch was taken out of the softmax, the pipe was\n"
      "  active 27% of the time and the kernel reached 250. The model's level is where the\n"
      "  instruction stream allows.\n",
      model_default, tl::kMeasuredAblation[0].tflops,
      100 * (1 - tl::kMeasuredAblation[0].tflops / model_default));
  ctx.say(
      "- One stage. Both find it the costliest single switch: with one K and one V buffer the\n"
      "  load of tile j + 1 cannot start before both consumers are done with tile j, so the\n"
      "  load's time is exposed at every tile.\n");
  ctx.print(
      "  The model loses less than the H200 ({:.3f} against {:.3f}). It prices a load by its\n"
      "  share of the L2's bandwidth alone; the lesson's reading (not measured here) is that the\n"
      "  kernel also waits out each copy's round trip to the L2 and back, which a second buffer\n"
      "  hides and one exposes.\n"
      "- A third stage buys nothing in either: two stages already hide the loads.\n",
      model_gain("1 stage"), tl::measured_gain("1 stage"));
  ctx.print(
      "- Ping-pong and intra-warpgroup overlap. The model finds them worth nothing: with two\n"
      "  consumers, one's softmax runs while the other's products occupy the tensor cores, turns\n"
      "  or not, and its exp unit has time to spare. The H200 agrees on ping-pong (the default\n"
      "  over the kernel without it: {:.3f}) but finds the overlap worth {:.0f}%: on the real\n"
      "  kernel the softmax costs nearly as much as the products (its instructions, not only its\n"
      "  exps), so hiding the wait for S_j's product behind the softmax is what FlashAttention-3\n"
      "  says it is. A model that charged the softmax's instructions would see it (exercise 2).\n",
      tl::measured_gain("no ping-pong"),
      100 * (tl::measured_gain("no intra-warpgroup overlap") - 1));
  ctx.say(
      "- Warp specialisation. The model sees only that consumer 0 must wait, before it refills a\n"
      "  buffer, for consumer 1 to release it; the H200 loses more without it: there consumer 0\n"
      "  also spends its own issue slots on the copies and the barrier waits, and nobody hands\n"
      "  the consumers the producer's registers. Neither is in the model.\n\n");
}

void item_step(LessonContext& ctx) {
  ctx.step("One work item measured: what it costs beyond its tiles");
  const auto& items = tl::kMeasuredItems;
  ctx.print(
      "The model runs one item's tiles. The kernel's persistent block runs item after item, and\n"
      "its pipeline log (bench_pipeline_log: each step of the producer and of each consumer\n"
      "stamped with the SM's clock) shows what an item costs beyond its tiles. Medians over\n"
      "every consumer's items, d = 128, non-causal, in ns; from {}:\n\n",
      tl::kMeasuredItemSource);
  std::vector<std::string> header{"phase"};
  for (const auto& m : items) header.emplace_back(m.what);
  Table table(header, {true});
  const auto row = [&](std::string name, auto field) {
    std::vector<std::string> cells{std::move(name)};
    for (const auto& m : items) cells.push_back(fmt::format("{:.0f}", field(m)));
    table.add(cells);
  };
  using Item = tl::MeasuredItem;
  const auto& f = facts();
  const auto tiles = [&](const Item& m) { return m.N / f.Bc; };
  const auto fixed = [&](const Item& m) { return m.item_ns - double(tiles(m)) * m.section_ns; };
  const Index consumer_threads = f.consumers * gpu::fa3::kWarpgroupThreads;
  row("a section of the mainloop", [](const Item& m) { return m.section_ns; });
  row("the item, from item to item", [](const Item& m) { return m.item_ns; });
  row("  beyond its tiles (item - tiles x section)", fixed);
  row("start: Q, K_0, the turn awaited", [](const Item& m) { return m.start_ns; });
  row("S_0 in flight", [](const Item& m) { return m.s0_ns; });
  row("the softmax of S_0", [](const Item& m) { return m.softmax0_ns; });
  row("the last V and the turn awaited", [](const Item& m) { return m.last_wait_ns; });
  row("the last U += W V in flight", [](const Item& m) { return m.last_pv_ns; });
  row("O = U / l written", [](const Item& m) { return m.o_ns; });
  row("from O to the next item", [](const Item& m) { return m.next_ns; });
  ctx.table(table);
  const Item& long_item = items[0];
  const Item& short_item = items[1];
  const Item& slots = items[2];
  ctx.print(
      "Beyond its tiles an item costs {:.0f} ns at N = {} and {:.0f} ns at N = {}: about one\n"
      "section, whatever N. At N = {} it is about 1/{} of an item, at N = {} 1/{}: that is\n"
      "where short sequences lose. Of the phases around the mainloop the model has S_0, its\n"
      "softmax and the last product; it has no O, no wait for the ping-pong turn at an item's\n"
      "start, and nothing between items. The last was each of the {} consumer threads working\n"
      "out the next item (batch, head, first row, KV tiles) from its index, five divisions by\n"
      "run-time values, while the other consumer's softmax took the issue slots, and while the\n"
      "producer had worked out the same item already. Now the producer writes it beside the\n"
      "item's Q and the consumers read it: from O to the next item {:.0f} -> {:.0f} ns, the item\n"
      "{:.0f} -> {:.0f} ns (its sections moved too: the stamps are fixed points in the\n"
      "instruction schedule, which the change moved), and the kernel, timed without the log,\n"
      "{:.3f} and {:.3f} times as fast at N = {} in two runs.\n"
      "(The stamps slow a section from {:.2f} us to {:.2f} us, so read the phases against\n"
      "the log's own section.)\n\n",
      fixed(short_item), short_item.N, fixed(long_item), long_item.N, short_item.N,
      tiles(short_item) + 1, long_item.N, tiles(long_item) + 1, consumer_threads,
      short_item.next_ns, slots.next_ns, short_item.item_ns, slots.item_ns,
      tl::kItemSlotsSpeedUp[0], tl::kItemSlotsSpeedUp[1], short_item.N,
      tl::kUnloggedSectionNs / 1e3, short_item.section_ns / 1e3);
  const Item& handed = items[3];
  ctx.print(
      "The item's start was next: in it consumer 0 waited for the ping-pong turn, which the\n"
      "last consumer handed it only at its own next item, after its O. Now the last consumer\n"
      "hands the turn over as soon as it has issued its last U += W V: the start {:.0f} -> {:.0f}\n"
      "ns, and the kernel without the log {:.3f}, {:.3f} and {:.3f} times as fast at N = {} in\n"
      "three runs. That is within what two runs of one kernel differ by; the log is what shows\n"
      "where the time went. (O is longer in that log: it has two more stamps inside O.)\n\n",
      slots.start_ns, handed.start_ns, tl::kEarlyHandOverSpeedUp[0], tl::kEarlyHandOverSpeedUp[1],
      tl::kEarlyHandOverSpeedUp[2], handed.N);
}

void pictures(LessonContext& ctx, const tl::StageTimes& t) {
  ctx.step("The timelines");
  const double step = t.mma / 4;  // four characters per product of one consumer
  ctx.print(
      "The first {} KV tiles; one character = {:.3f} us; upper case: consumer 0 (and every\n"
      "load), lower case: consumer 1; '.' idle. K, V loads, S first product, E softmax, P\n"
      "second product.\n\n",
      kDrawnTiles, step * 1e6);
  for (const auto& run : tl::kMeasuredAblation) {
    auto tasks = tl::schedule(run.switches, t, kDrawnTiles);
    tl::run(tasks);
    ctx.print("{} ({})\n", run.name, tl::describe(run.switches));
    const auto lines = tl::draw(tasks, step, kDrawWidth);
    for (int u = 0; u < tl::kUnits; ++u)
      ctx.print("  {:<13}|{}\n", tl::to_string(tl::Unit(u)), lines[std::size_t(u)]);
    ctx.say("\n");
  }
}

}  // namespace

void run_lesson_08(LessonContext& ctx) {
  const auto& h200 = sim::find_profile("h200");
  const double dram_share = lesson08::kv_dram_share(h200);
  const auto t = lesson08::stage_times(h200, dram_share);
  tasks_step(ctx, t, h200, dram_share);
  ablation_step(ctx, t, h200);
  disagreement_step(ctx, t, h200);
  item_step(ctx);
  pictures(ctx, t);
  ctx.finish("lesson 9: FlashAttention-4's conditional rescaling.");
}

}  // namespace flashlab::app

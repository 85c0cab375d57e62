// Lesson 0: attention as three operators, and what their N x N intermediates cost.
#include "gpu_bridge/gpu_step.hpp"
#include "gpu_bridge/kernels.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/naive.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <algorithm>

namespace flashlab::app {

namespace {

constexpr Index kSmallN = 6, kSmallD = 4;             // small enough to print whole
constexpr std::uint64_t kSeed = 0;
constexpr Index kN = 8192, kD = 128, kHeads = 32;    // the course's running example
constexpr double kBf16Bytes = 2;
constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;

void small_example(LessonContext& ctx) {
  ctx.step("The three operators on six tokens");
  ctx.say("Attention of one head: S = Q K^T / sqrt(d), P = softmax(S) row by row, O = P V.\n"
          "Run as three separate operators, each writes its result to memory and the next\n"
          "reads it back. Here N = 6 tokens, d = 4, random inputs:\n\n");
  const auto in = random_inputs({.N = kSmallN, .d = kSmallD, .seed = kSeed});
  const auto r = cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(),
                                              in.V.cast<double>());
  Table shapes({"tensor", "shape", "first row"}, {true, true, true});
  const auto row = [](const auto& X) {
    const auto first = X.row(0);  // one block object: its begin() and end() must match
    return num_row(std::vector<double>(first.begin(), first.end()), 4, kSmallN);
  };
  const std::string input_shape = fmt::format("({}, {})", kSmallN, kSmallD);
  shapes.add({"Q", input_shape, row(in.Q.cast<double>())});
  shapes.add({"K", input_shape, row(in.K.cast<double>())});
  shapes.add({"V", input_shape, row(in.V.cast<double>())});
  shapes.add({"S = Q K^T / sqrt(d)", fmt::format("({}, {})", kSmallN, kSmallN), row(r.S)});
  shapes.add({"P = softmax(S)", fmt::format("({}, {})", kSmallN, kSmallN), row(r.P)});
  shapes.add({"O = P V", fmt::format("({}, {})", kSmallN, kSmallD), row(r.O)});
  ctx.table(shapes);
  ctx.print(
      "Each row of P sums to 1 (the first: {}). S and P are N x N; the inputs and the\n"
      "output are only N x d. At N = 6 nobody cares. At N = 8192 everybody does.\n\n",
      num(r.P.row(0).sum(), 15));
}

void memory_cost(LessonContext& ctx) {
  ctx.step("What S and P weigh at N = 8192, d = 128 in bf16");
  const double input = double(kN) * kD * kBf16Bytes, square = double(kN) * kN * kBf16Bytes;
  Table t({"tensor", "elements", "bytes"}, {true});
  t.add({"one of Q, K, V, O", fmt::format("N d = {}", kN * kD), fmt::format("{:.0f} MiB", input / kMiB)});
  t.add({"S or P", fmt::format("N^2 = {}", kN * kN), fmt::format("{:.0f} MiB", square / kMiB)});
  t.add({"S and P together", "2 N^2", fmt::format("{:.0f} MiB", 2 * square / kMiB)});
  t.add({fmt::format("S and P, {} heads", kHeads), fmt::format("{} N^2", 2 * kHeads),
         fmt::format("{:.0f} GiB", 2 * square * kHeads / kGiB)});
  ctx.table(t);
  ctx.print("Writing S, reading it back, writing P and reading it back moves {:.0f} MiB per head\n"
            "before Q, K, V and O are even counted: {} times the {:.0f} MiB of one input.\n\n",
            4 * square / kMiB, ctx.emph(fmt::format("{:.0f}", 4 * square / input)), input / kMiB);
}

void simulated_traffic(LessonContext& ctx) {
  ctx.step("The HBM traffic, counted by the simulator");
  const sim::HardwareProfile& hw = target_profile();  // the profile owns its SRAM size
  ctx.print(
      "The simulator runs each program against a model of HBM (unbounded, every byte\n"
      "counted) and on-chip SRAM ({}, what one SM of an H200 gives a thread block).\n"
      "naive is the three operators; fa2 is the fused, tiled FlashAttention-2 loop of\n"
      "lesson 3, with the tiles of flashlab's fa2 kernel.\n\n",
      sim::format_bytes(double(hw.sram_per_sm)));
  const sim::Problem p{.N = kN, .d = kD, .dtype = sim::DType::bf16, .sram_bytes = hw.sram_per_sm};
  const auto naive = sim::count(sim::Algorithm::naive, p);
  const auto fa2 = sim::count(sim::Algorithm::fa2, fa2_kernel_problem(p));
  std::vector<std::string> names;  // every tensor of either program, naive's first
  for (const auto* r : {&naive, &fa2})
    for (const auto& tensor : r->tensors)
      if (std::find(names.begin(), names.end(), tensor.name) == names.end())
        names.push_back(tensor.name);
  const auto cell = [](const sim::Report& r, const std::string& name, bool read) -> std::string {
    for (const auto& t : r.tensors)
      if (t.name == name) return sim::format_bytes(double(read ? t.read : t.written));
    return "(never exists)";
  };
  Table t({"tensor", "naive read", "naive written", "fa2 read", "fa2 written"}, {true});
  for (const auto& name : names)
    t.add({name, cell(naive, name, true), cell(naive, name, false), cell(fa2, name, true),
           cell(fa2, name, false)});
  t.add({"total", sim::format_bytes(double(naive.bytes_read())),
         sim::format_bytes(double(naive.bytes_written())), sim::format_bytes(double(fa2.bytes_read())),
         sim::format_bytes(double(fa2.bytes_written()))});
  ctx.table(t);
  ctx.print("Matrix FLOPs: naive {:.3g}, fa2 {:.3g}: the same arithmetic (4 N^2 d = {:.3g}).\n"
            "fa2 still reads K and V once per query tile (Br = {}), so its traffic is not\n"
            "linear in N; lesson 5 works out exactly how it scales. What it never does is\n"
            "write or read an N x N matrix.\n\n",
            double(naive.ops.matrix_flops), double(fa2.ops.matrix_flops), 4.0 * kN * kN * kD,
            fa2.tiles->tiles.Br);
}

}  // namespace

void run_lesson_00(LessonContext& ctx) {
  small_example(ctx);
  memory_cost(ctx);
  simulated_traffic(ctx);
  gpu_side_by_side(ctx, {.N = 4096, .d = 64, .kernels = {"naive", "fa2"},
                         .what_it_shows = "The naive kernel writes S and P to HBM; fa2 never does: "
                                          "the time column shows what that is worth."});
  ctx.finish("lesson 1 makes softmax safe to compute; lesson 2 makes it computable in pieces.");
}

}  // namespace flashlab::app

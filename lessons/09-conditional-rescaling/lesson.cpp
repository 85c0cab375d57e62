// Lesson 9: FlashAttention-4's conditional rescaling: the invariant that makes it exact,
// the rescales it saves on real inputs, and the bug of moving the base without rescaling.
#include "09-conditional-rescaling/book_data.hpp"
#include "09-conditional-rescaling/gpu_rescale.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/conditional_rescaling.hpp"
#include "flashlab/cpu/naive.hpp"

#include <cmath>
#include <utility>

namespace flashlab::app {

namespace {

constexpr Index kN = 1024, kD = 64, kTile = 64;
constexpr std::uint64_t kSeed = 9;

// Inputs whose scores grow along the sequence: key j is scaled by (1 + j * growth / N), so
// the running max keeps rising, the worst case for the standard update.
TraceInputs inputs(double growth) {
  auto in = random_inputs({.N = kN, .d = kD, .seed = kSeed});
  for (Index j = 0; j < kN; ++j) in.K.row(j) *= static_cast<float>(1.0 + growth * double(j) / kN);
  return in;
}

void invariant(LessonContext& ctx) {
  ctx.step("The base need not be the max");
  ctx.say("The standard update keeps m equal to the running max and rescales l and U by\n"
          "alpha = exp(m - m') whenever the max grows: a (Br, d) multiply per tile. But for\n"
          "any base r,\n"
          "  l(r) = sum_j exp(x_j - r),   U(r) = sum_j exp(x_j - r) V_j,\n"
          "and both carry the factor exp(-r), so O = U(r) / l(r) does not depend on r. The\n"
          "base only has to keep the weights exp(x_j - r) in range. FlashAttention-4 keeps r\n"
          "until the max passes it by more than tau = 8 (in log2 units): every weight then\n"
          "stays below 2^8 = 256, far from fp32's limit near 2^128.\n\n");
  const cpu::Vector<double> x{{1.0, 4.0, 2.5, 3.0}}, V{{10.0, 20.0, 30.0, 40.0}};
  Table t({"base r", "l(r)", "U(r)", "U(r) / l(r)"});
  for (double r : {x.maxCoeff(), x.maxCoeff() - 3.0, x.maxCoeff() + 5.0}) {
    const cpu::Vector<double> w = (x.array() - r).exp().matrix();
    t.add({num(r), num(w.sum()), num(w.dot(V)), num(w.dot(V) / w.sum(), 15)});
  }
  ctx.print("Scores x = ({}), values V = ({}):\n\n", num_row({1, 4, 2.5, 3}), num_row({10, 20, 30, 40}));
  ctx.table(t);
}

void counts(LessonContext& ctx) {
  ctx.step("Rescales performed and skipped on real inputs");
  ctx.print("N = {}, d = {}, tiles of {} x {}, fp32, the FA2 loop with conditional_update.\n"
            "A (row, tile) update is `rescaled` when the max outgrew the base by more than tau,\n"
            "`skipped` when the max grew but stayed within tau (the standard algorithm would\n"
            "have rescaled), `kept` when the max did not grow.\n\n",
            kN, kD, kTile, kTile);
  Table t({"scores", "tau", "rescaled", "skipped", "kept", "saved", "max weight", "max |O err|"},
          {true});
  cpu::AttentionOptions options;
  options.tiles = {kTile, kTile};
  for (const auto& [label, growth] : {std::pair<std::string, double>{"random", 0.0},
                                      {"growing along N", 8.0}}) {
    const auto in = inputs(growth);
    const auto exact = cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(),
                                                    in.V.cast<double>(), options);
    for (double tau : {0.0, cpu::kFa4RescaleThresholdLog2}) {
      const auto r = cpu::forward_conditional<float>(in.Q, in.K, in.V, options, {.tau_log2 = tau});
      t.add({label, num(tau), fmt::format("{}", r.rescales.rescaled),
             fmt::format("{}", r.rescales.skipped), fmt::format("{}", r.rescales.kept),
             fmt::format("{:.0f}%", 100 * r.rescales.skipped_fraction()), num(r.max_weight, 4),
             num((r.O.cast<double>() - exact.O).cwiseAbs().maxCoeff(), 3)});
    }
  }
  ctx.table(t);
  ctx.say("tau = 0 is the standard algorithm. With tau = 8 the `saved` column is the share of\n"
          "its rescales skipped: on random scores the max never outgrows the first tile's by\n"
          "8 ln 2, so none is needed; when scores grow along the sequence some still are. The\n"
          "largest weight stays below 2^8 = 256 and the output is as accurate as before.\n"
          "Each skipped rescale spares one row of U its d multiplies by alpha; in FA4's design\n"
          "a separate correction warpgroup does that work, and does it only when a base moves.\n\n");
}

void verified(LessonContext& ctx) {
  ctx.step("The invariant, checked after every tile");
  const auto in = inputs(8.0);
  cpu::AttentionOptions options;
  options.tiles = {kTile, kTile};
  const auto r = cpu::forward_conditional<float>(
      in.Q, in.K, in.V, options, {.tau_log2 = cpu::kFa4RescaleThresholdLog2, .verify_invariant = true});
  ctx.print("After every tile the state must satisfy l = l(r) and U = U(r) at its own base r\n"
            "(recomputed in fp64 from every score the rows have seen). Worst relative error over\n"
            "the run: {} (fp32 rounding).\n\n", num(r.invariant_error, 3));
}

void the_bug(LessonContext& ctx) {
  ctx.step("The bug: moving the base without rescaling");
  ctx.say(
      "FlashAttention-4's rule has one easy mistake: update the base r but skip the\n"
      "rescale of l and U. Then old and new weights sit at different bases and O = U / l\n"
      "is silently wrong.\n"
      "RescaleVariant::base_without_rescale makes that mistake on purpose:\n\n");
  const auto in = inputs(8.0);
  cpu::AttentionOptions options;
  options.tiles = {kTile, kTile};
  const auto exact = cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(),
                                                  in.V.cast<double>(), options);
  Table t({"variant", "max |O err|", "invariant error"}, {true});
  for (const auto variant : {cpu::RescaleVariant::correct, cpu::RescaleVariant::base_without_rescale}) {
    const auto r = cpu::forward_conditional<float>(
        in.Q, in.K, in.V, options,
        {.tau_log2 = cpu::kFa4RescaleThresholdLog2, .variant = variant, .verify_invariant = true});
    t.add({variant == cpu::RescaleVariant::correct ? "correct" : "base moved, l and U not rescaled",
           num((r.O.cast<double>() - exact.O).cwiseAbs().maxCoeff(), 3),
           num(r.invariant_error, 3)});
  }
  ctx.table(t);
  ctx.say("No NaN, no overflow, nothing to notice except a wrong answer: that is why the\n"
          "invariant check exists.\n\n");
}

// Step 2's two kinds of scores, for the GPU step.
RescaleCase rescale_case(std::string label, double growth) {
  auto in = inputs(growth);
  return {std::move(label), std::move(in.Q), std::move(in.K), std::move(in.V)};
}

void on_the_gpu(LessonContext& ctx) {
  gpu_rescale_step(ctx, {rescale_case("random", 0.0), rescale_case("growing along N", 8.0)},
                   kTile);
}

}  // namespace

void run_lesson_09(LessonContext& ctx) {
  invariant(ctx);
  counts(ctx);
  verified(ctx);
  the_bug(ctx);
  on_the_gpu(ctx);
  ctx.finish("lesson 10: decode, where one query meets a long KV cache.");
}

BaseAlongRow base_along_row(Index row) {
  const auto in = inputs(8.0);
  const float threshold = float(cpu::kFa4RescaleThresholdLog2 * std::log(2.0));
  const float scale = 1.0f / std::sqrt(float(kD));
  const cpu::Matrix<float> q = in.Q.row(row) * scale;  // (1, d)
  auto cs = cpu::ConditionalState<float>::empty(1, kD);
  BaseAlongRow out{.row = row, .tile = kTile, .threshold = threshold, .running_max = {},
                   .base = {}, .rescales = 0};
  for (Index k0 = 0; k0 < kN; k0 += kTile) {
    const cpu::Matrix<float> S = q * in.K.middleRows(k0, kTile).transpose();  // (1, Bc)
    const auto step = cpu::conditional_update<float, float>(cs, S, in.V.middleRows(k0, kTile),
                                                            threshold);
    out.rescales += step.actions[0] == cpu::RescaleAction::rescaled;
    out.running_max.push_back(cs.max_seen(0));
    out.base.push_back(cs.state.m(0));
  }
  return out;
}

}  // namespace flashlab::app

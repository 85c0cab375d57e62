// Lesson 13: dropout inside fused attention. The mask is a function of where a weight sits
// (Philox4x32-10 on (seed, offset, batch, head, row, column)), so it is never stored: the
// forward draws it tile by tile and the backward draws the same bits again. The lesson
// shows a mask, counts the bytes a stored one would cost, checks the replayed backward
// against the naive one and against finite differences, and measures that the 1/(1 - p)
// scale keeps the expected output.
#include "kit/lesson_context.hpp"

#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/naive_backward.hpp"

#include <cmath>
#include <random>

namespace flashlab::app {

namespace {

using cpu::Index;

constexpr double kP = 0.25;  // the dropout probability of every step
constexpr cpu::Dropout kDropout{.p = kP, .seed = 2026, .offset = 0};
constexpr Index kMaskRows = 6, kMaskCols = 16;  // the mask printed in step 1

cpu::Matrix<double> random_matrix(Index rows, Index cols, std::mt19937_64& gen) {
  std::normal_distribution<double> normal;
  cpu::Matrix<double> X(rows, cols);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(gen);
  return X;
}

void the_rule(LessonContext& ctx) {
  ctx.step("A mask that is a function, not a tensor");
  ctx.say(
      "Dropout zeroes each attention weight P_ij with probability p and multiplies the\n"
      "survivors by 1/(1 - p). A framework draws a random (N_q, N_k) mask and keeps it for\n"
      "the backward pass. A fused kernel cannot: it never holds more than a tile of P.\n"
      "So the mask is made a pure function of the weight's position. Philox4x32-10, a\n"
      "counter-based generator, turns a 128-bit counter and a 64-bit key into four random\n"
      "32-bit words, with no state carried from one call to the next:\n"
      "  counter = (column / 4, row, batch * 2^16 + head, offset),  key = seed\n"
      "  weight (row, column) is kept when word[column % 4] >= floor(p * 2^32).\n"
      "Any thread can draw any weight's bit directly, in any order, in any tile.\n\n");
  const cpu::DropoutMask mask(kDropout);
  const cpu::PhiloxCounter words =
      cpu::philox4x32_10({0, 0, cpu::dropout_head_word(0, 0), kDropout.offset},
                         {std::uint32_t(kDropout.seed), std::uint32_t(kDropout.seed >> 32)});
  ctx.print(
      "p = {}, seed = {}, offset = {}, batch 0, head 0: threshold floor(p 2^32) = {}.\n"
      "Row 0, columns 0-3, one Philox call:\n\n",
      kP, kDropout.seed, kDropout.offset, mask.threshold());
  Table t({"column", "Philox word", "kept"});
  for (Index c = 0; c < cpu::kColumnsPerPhiloxCall; ++c)
    t.add({fmt::format("{}", c), fmt::format("{}", words[std::size_t(c)]),
           mask.keep(0, c) ? "yes" : "no"});
  ctx.table(t);
  ctx.print("\nThe first {} rows and {} columns of the mask (# kept, . dropped):\n\n", kMaskRows,
            kMaskCols);
  Index kept = 0;
  for (Index r = 0; r < kMaskRows; ++r) {
    std::string row = fmt::format("  row {}  ", r);
    for (Index c = 0; c < kMaskCols; ++c) {
      row += mask.keep(r, c) ? '#' : '.';
      kept += mask.keep(r, c);
    }
    ctx.say(row + "\n");
  }
  ctx.print("\n{} of {} kept ({:.1f}%; 1 - p = {:.0f}%).\n\n", kept, kMaskRows * kMaskCols,
            100.0 * double(kept) / double(kMaskRows * kMaskCols), 100 * (1 - kP));
}

void bytes_saved(LessonContext& ctx) {
  ctx.step("What a stored mask would cost");
  constexpr double N = 8192, heads = 32, batch = 1, kMiB = 1 << 20;
  constexpr double kSeedBytes = sizeof(cpu::Dropout::seed),
                   kOffsetBytes = sizeof(cpu::Dropout::offset);
  const double weights = batch * heads * N * N;
  ctx.print("N = {:.0f}, {:.0f} heads: {:.0f} attention weights per layer.\n\n", N, heads, weights);
  Table t({"what the backward gets the mask from", "bytes kept", "HBM bytes (written + read)"},
          {true});
  t.add({"a byte per weight (a framework's bool mask)", fmt::format("{:.0f} MiB", weights / kMiB),
         fmt::format("{:.0f} MiB", 2 * weights / kMiB)});
  t.add({"a bit per weight (packed)", fmt::format("{:.0f} MiB", weights / 8 / kMiB),
         fmt::format("{:.0f} MiB", 2 * weights / 8 / kMiB)});
  t.add({"the rule: seed and offset", fmt::format("{:.0f} bytes", kSeedBytes + kOffsetBytes), "0"});
  ctx.table(t);
  ctx.say(
      "The price instead is arithmetic: one Philox call (10 rounds of two 32x32-bit\n"
      "multiplies) per four weights, in the forward and again in the backward.\n\n");
}

struct Problem {
  cpu::Matrix<double> Q, K, V, dO;
};

Problem make_problem(Index n_q, Index n_k, Index d, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  return {random_matrix(n_q, d, gen), random_matrix(n_k, d, gen), random_matrix(n_k, d, gen),
          random_matrix(n_q, d, gen)};
}

constexpr Index kNq = 97, kNk = 113, kD = 24;  // awkward: no tile divides them

void replay(LessonContext& ctx) {
  ctx.step("The backward draws the same mask again");
  ctx.say(
      "With dropout the forward computes O = (P o Z) V, Z holding 0 or 1/(1 - p). The\n"
      "backward needs Z twice: dV_j += (P_ij o Z_ij)^T dO_i and dP_ij = (dO_i V_j^T) o Z_ij;\n"
      "D = rowsum(dO o O) still holds. It draws Z_ij from the rule for the tile it is on.\n"
      "Below, the forward runs with tiles of 16 x 16 and the backward with 32 x 8, so no\n"
      "tile of one pass matches a tile of the other; the naive backward materialises the\n"
      "whole Z once.\n\n");
  const auto p = make_problem(kNq, kNk, kD, 13);
  const cpu::DropoutMask mask(kDropout);
  cpu::AttentionOptions fwd_options, bwd_options;
  fwd_options.tiles = {16, 16};
  bwd_options.tiles = {32, 8};
  const auto fwd = cpu::forward_q_outer<double>(p.Q, p.K, p.V, fwd_options, {}, &mask);
  const auto naive = cpu::naive_backward<double>(p.Q, p.K, p.V, p.dO, {}, &mask);
  const auto g =
      cpu::backward_kv_outer<double>(p.Q, p.K, p.V, fwd.O, fwd.L, p.dO, bwd_options, &mask);
  // The mistake: a backward that draws a different mask (here, the next offset).
  const cpu::DropoutMask other({.p = kP, .seed = kDropout.seed, .offset = kDropout.offset + 1});
  const auto wrong =
      cpu::backward_kv_outer<double>(p.Q, p.K, p.V, fwd.O, fwd.L, p.dO, bwd_options, &other);
  const auto err = [](const cpu::Matrix<double>& a, const cpu::Matrix<double>& b) {
    return num((a - b).cwiseAbs().maxCoeff(), 3);
  };
  ctx.print("N_q = {}, N_k = {}, d = {}, fp64, p = {}:\n\n", kNq, kNk, kD, kP);
  Table t({"backward", "max |dQ err|", "max |dK err|", "max |dV err|"}, {true});
  t.add({"tiled, same (seed, offset)", err(g.dQ, naive.dQ), err(g.dK, naive.dK),
         err(g.dV, naive.dV)});
  t.add({"tiled, offset + 1", err(wrong.dQ, naive.dQ), err(wrong.dK, naive.dK),
         err(wrong.dV, naive.dV)});
  ctx.table(t);
  ctx.say(
      "Replayed, the tiled gradients agree with the naive ones to fp64 rounding. Drawn\n"
      "from another offset, they are the gradients of a different function: wrong by as\n"
      "much as the gradients themselves, and nothing crashes.\n\n");
}

// The loss f = sum(dO o O): its gradient with respect to Q, K, V is what the backward returns.
double loss(const Problem& p, const cpu::DropoutMask& mask) {
  return p.dO
      .cwiseProduct(
          cpu::naive_attention<double>(p.Q, p.K, p.V, {}, cpu::SoftmaxKind::stable, &mask).O)
      .sum();
}

void finite_differences(LessonContext& ctx) {
  ctx.step("Checked against finite differences");
  ctx.say(
      "An independent check: the loss f = sum(dO o O) with the same dropout mask, and\n"
      "(f(x + h) - f(x - h)) / 2h for single entries x of Q, K and V. The mask does not\n"
      "move when x does (it depends on positions only), so f is smooth in x.\n\n");
  auto p = make_problem(17, 23, 8, 14);
  const cpu::DropoutMask mask(kDropout);
  const auto fwd = cpu::forward_q_outer<double>(p.Q, p.K, p.V, {}, {}, &mask);
  const auto g = cpu::backward_kv_outer<double>(p.Q, p.K, p.V, fwd.O, fwd.L, p.dO, {}, &mask);
  constexpr double h = 1e-5;
  Table t({"tensor", "entries", "largest |gradient|", "max |backward - difference|"}, {true});
  for (const auto& [name, X, dX] :
       {std::tuple{"Q", &p.Q, &g.dQ}, std::tuple{"K", &p.K, &g.dK}, std::tuple{"V", &p.V, &g.dV}}) {
    double worst = 0;
    Index entries = 0;
    for (Index r = 0; r < X->rows(); r += 3)
      for (Index c = 0; c < X->cols(); c += 3, ++entries) {
        const double x = (*X)(r, c);
        (*X)(r, c) = x + h;
        const double up = loss(p, mask);
        (*X)(r, c) = x - h;
        const double down = loss(p, mask);
        (*X)(r, c) = x;
        worst = std::max(worst, std::fabs((up - down) / (2 * h) - (*dX)(r, c)));
      }
    t.add({name, fmt::format("{}", entries), num(dX->cwiseAbs().maxCoeff(), 3), num(worst, 3)});
  }
  ctx.print("N_q = 17, N_k = 23, d = 8, fp64, h = {}:\n\n", h);
  ctx.table(t);
  ctx.say(
      "Central differences err by about h^2 = 1e-10 times the third derivative: the\n"
      "differences above are that, not a wrong gradient.\n\n");
}

void expectation(LessonContext& ctx) {
  ctx.step("1/(1 - p) keeps the expected output");
  ctx.say(
      "Each weight survives with probability 1 - p and is then scaled by 1/(1 - p), so\n"
      "E[Z_ij] = 1 and E[O] = E[(P o Z) V] = P V: the output without dropout. Measured:\n"
      "the mean of O over many seeds, against O without dropout.\n\n");
  constexpr Index n = 16, d = 8;
  const auto p = make_problem(n, n, d, 15);
  const cpu::Matrix<double> plain = cpu::naive_attention<double>(p.Q, p.K, p.V).O;
  Table t({"seeds", "kept share", "max |mean O - O|", "same without 1/(1 - p)"});
  cpu::Matrix<double> sum = cpu::Matrix<double>::Zero(n, d);
  double kept = 0;
  std::uint64_t seeds = 0;
  for (const std::uint64_t upto : {10, 100, 1000, 10000}) {
    for (; seeds < upto; ++seeds) {
      const cpu::DropoutMask mask({.p = kP, .seed = seeds, .offset = 0});
      sum += cpu::naive_attention<double>(p.Q, p.K, p.V, {}, cpu::SoftmaxKind::stable, &mask).O;
      kept += mask.multipliers<double>(0, n, 0, n).count();
    }
    const cpu::Matrix<double> mean = sum / double(seeds);
    t.add({fmt::format("{}", seeds), fmt::format("{:.4f}", kept / double(seeds * n * n)),
           num((mean - plain).cwiseAbs().maxCoeff(), 3),
           num((mean * (1 - kP) - plain).cwiseAbs().maxCoeff(), 3)});
  }
  ctx.print("N = {}, d = {}, p = {}, fp64, seeds 0, 1, 2, ...:\n\n", n, d, kP);
  ctx.table(t);
  ctx.print(
      "With the scale the mean closes in on O like 1/sqrt(seeds), the noise of an average;\n"
      "without it, it settles at (1 - p) O, off by p |O| = {} at the largest entry.\n\n",
      num(kP * plain.cwiseAbs().maxCoeff(), 3));
}

void on_a_gpu(LessonContext& ctx) {
  ctx.step("On a GPU");
  ctx.say(
      "flashlab's CUDA kernels include the very header that states the rule\n"
      "(cpu_reference/include/flashlab/cpu/philox_rule.hpp: the Philox constants and the\n"
      "counter's layout), so the fa2 forward and both backward kernels draw the CPU\n"
      "reference's mask bit for bit; the GPU tests compare the masks and the gradients.\n\n");
}

}  // namespace

void run_lesson_13(LessonContext& ctx) {
  the_rule(ctx);
  bytes_saved(ctx);
  replay(ctx);
  finite_differences(ctx);
  expectation(ctx);
  on_a_gpu(ctx);
  ctx.finish("lesson 14: FlashAttention-3's FP8, where every operand loses all but 3 bits.");
}

}  // namespace flashlab::app

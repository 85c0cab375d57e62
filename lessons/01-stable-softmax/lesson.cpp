// Lesson 1: the textbook softmax overflows; subtracting the row max fixes it at no cost.
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/softmax.hpp"

#include <cmath>
#include <limits>

namespace flashlab::app {

namespace {

std::vector<double> as_list(const auto& v) {
  return std::vector<double>(v.data(), v.data() + v.size());
}

template <class T>
cpu::Vector<T> scores(std::initializer_list<double> xs) {
  cpu::Vector<T> v(static_cast<Index>(xs.size()));
  Index k = 0;
  for (double x : xs) v[k++] = static_cast<T>(x);
  return v;
}

void small_scores(LessonContext& ctx) {
  ctx.step("Small scores: both formulas agree");
  const auto x = scores<float>({1, 2, 3});
  ctx.print("x = ({})   p_j = exp(x_j) / sum_k exp(x_k)\n\n", num_row(as_list(x)));
  Table t({"formula", "p"}, {true, true});
  t.add({"textbook: exp(x) / sum exp(x)", num_row(as_list(cpu::unstable_softmax(x)))});
  t.add({"stable: exp(x - m) / sum exp(x - m)", num_row(as_list(cpu::stable_softmax(x)))});
  ctx.table(t);
}

void overflow(LessonContext& ctx) {
  ctx.step("Large scores: the textbook formula overflows");
  const float fp32_limit = std::log(std::numeric_limits<float>::max());
  const double fp64_limit = std::log(std::numeric_limits<double>::max());
  ctx.print("exp(x) is the largest finite number at x = {} in fp32 and x = {} in fp64.\n"
            "Above that it is inf, and inf / inf is NaN. Scores of a hundred are ordinary in\n"
            "attention once activations grow (scores scale with |q| |k|).\n\n",
            num(fp32_limit), num(fp64_limit));
  const auto x32 = scores<float>({80, 90, 100});
  const auto x64 = scores<double>({700, 710, 720});
  Table t({"precision", "x", "exp(x)", "textbook p", "stable p"}, {true, true, true, true, true});
  t.add({"fp32", num_row(as_list(x32)), num_row(as_list(x32.array().exp().eval())),
         num_row(as_list(cpu::unstable_softmax(x32))), num_row(as_list(cpu::stable_softmax(x32)))});
  t.add({"fp64", num_row(as_list(x64)), num_row(as_list(x64.array().exp().eval())),
         num_row(as_list(cpu::unstable_softmax(x64))), num_row(as_list(cpu::stable_softmax(x64)))});
  ctx.table(t);
}

void why_it_works(LessonContext& ctx) {
  ctx.step("Why subtracting the max changes nothing");
  ctx.say("With m = max_j x_j:  exp(x_j - m) / sum_k exp(x_k - m)\n"
          "                   = exp(-m) exp(x_j) / (exp(-m) sum_k exp(x_k)) = p_j.\n"
          "The factor exp(-m) cancels. Every exponent x_j - m is <= 0, so every term is in\n"
          "(0, 1], and the largest is exactly 1: the sum lies in [1, N] and cannot overflow.\n\n");
  const auto x = scores<double>({0.5, -1.25, 2.0, 0.75});
  double worst = 0;
  for (double shift : {-1000.0, -10.0, 10.0, 1000.0}) {
    const cpu::Vector<double> shifted = (x.array() + shift).matrix();
    worst = std::max(worst, (cpu::stable_softmax(shifted) - cpu::stable_softmax(x)).cwiseAbs().maxCoeff());
  }
  ctx.print("Check: shifting x = ({}) by -1000, -10, 10 and 1000 changes the stable\n"
            "softmax by at most {} (fp64).\n\n",
            num_row(as_list(x)), num(worst, 3));
}

void in_attention(LessonContext& ctx) {
  ctx.step("The same failure inside attention");
  constexpr float kBigInput = 12.0f;  // scores of several hundred: far past fp32's 88.7
  auto in = random_inputs({.N = 8, .d = 4, .seed = 1});
  in.Q.array() *= kBigInput;
  in.K.array() *= kBigInput;
  const auto bad = cpu::naive_attention<float>(in.Q, in.K, in.V, {}, cpu::SoftmaxKind::unstable);
  const auto good = cpu::naive_attention<float>(in.Q, in.K, in.V, {}, cpu::SoftmaxKind::stable);
  const auto nan_count = [](const cpu::Matrix<float>& X) { return X.array().isNaN().count(); };
  ctx.print(
      "Q and K scaled by {}: the largest score is {}.\n"
      "  textbook softmax: {} of the {} outputs are NaN\n"
      "  stable softmax:   {} NaN; the log-sum-exp L of the first row is {}\n\n",
      num(kBigInput), num(good.S.maxCoeff()), ctx.bad(fmt::format("{}", nan_count(bad.O))),
      bad.O.size(), ctx.good(fmt::format("{}", nan_count(good.O))), num(good.L[0]));
  ctx.say("Every FlashAttention kernel uses the stable form. The catch: it needs the row max\n"
          "before the first exponential, and the row max needs the whole row. Lesson 2 shows\n"
          "how to keep the stability while seeing the row a piece at a time.\n\n");
}

}  // namespace

void run_lesson_01(LessonContext& ctx) {
  small_scores(ctx);
  overflow(ctx);
  why_it_works(ctx);
  in_attention(ctx);
  ctx.finish("lesson 2, online softmax: the max and the sum in one pass, tile by tile.");
}

}  // namespace flashlab::app

// Lesson 2: the online-softmax state (m, l, U), the 49/15 example, and the general merge.
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"
#include "traces/trace_print.hpp"

#include "flashlab/cpu/softmax.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <cmath>
#include <random>

namespace flashlab::app {

namespace {

constexpr double kExact = 49.0 / 15.0;

void full_formula(LessonContext& ctx) {
  ctx.step("The answer, computed in full");
  ctx.say("One query and four keys. The exponentiated scores exp(S) are 1, 2, 4, 8 and the\n"
          "values are V = 1, 2, 3, 4 (one number each, to compute by hand):\n\n"
          "  O = (1*1 + 2*2 + 4*3 + 8*4) / (1 + 2 + 4 + 8) = 49 / 15\n\n");
  const auto one_tile = trace_worked_example(4);
  ctx.print("cpu_reference with a single KV tile of all four keys gives O = {}\n"
            "and 49/15 = {}.\n\n",
            num(one_tile.query_tiles[0].O(0, 0), 17), num(kExact, 17));
}

void one_key_at_a_time(LessonContext& ctx) {
  ctx.step("One key at a time: the running state");
  ctx.say("Online softmax keeps, per query, m (the largest score so far), l (the sum of\n"
          "exp(S - m) so far) and U (the sum of exp(S - m) V so far). When a larger score\n"
          "arrives, everything already summed is moved to the new base by one factor,\n"
          "alpha = exp(m_old - m_new). No score is ever read twice. Tile size Bc = 1:\n\n");
  const auto trace = trace_worked_example(1);
  Table t({"key", "exp(S)", "m", "exp(m)", "alpha", "l", "U", "U / l"});
  for (const auto& r : trace.tiles) {
    const double U = r.U(0, 0);
    t.add({fmt::format("{}", r.k0), num(std::exp(r.tile_max[0])), num(r.m[0]),
           num(std::exp(r.m[0])), num(r.alpha[0]), num(r.l[0]), num(U), num(U / r.l[0])});
  }
  ctx.table(t);
  ctx.say("alpha is 0 at the first key (the empty state has m = -inf and contributes\n"
          "nothing), then 1/2 each time: every new key here doubles the max. U / l is the\n"
          "output of the keys seen so far; after the last key it is the answer.\n\n");
}

void two_tiles(LessonContext& ctx) {
  ctx.step("Two tiles of two keys, merged");
  const auto trace = trace_worked_example(2);
  const auto& a = trace.tiles[0];
  const auto& b = trace.tiles[1];
  ctx.print(
      "Keys count from 0, as in every trace. Tile A (keys {}) on its own ends with\n"
      "m_A = log 2, l_A = 1/2 + 1 = {}, U_A = 1/2 + 2 = {}. Tile B (keys {}) raises the\n"
      "max to m = log 8, so alpha = exp(m_A - m) = {} shrinks A's sums before B's\n"
      "weights (1/2, 1) join:\n\n",
      index_range(a.k0, a.cols), num(a.l[0]), num(a.U(0, 0)), index_range(b.k0, b.cols),
      num(b.alpha[0]));
  Table t({"after", "m", "alpha", "l", "U", "U / l"}, {true});
  for (const auto* r : {&a, &b})
    t.add({"keys " + index_range(r->k0, r->cols), num(r->m[0]), num(r->alpha[0]), num(r->l[0]),
           num(r->U(0, 0)), num(r->U(0, 0) / r->l[0], 15)});
  ctx.table(t);
  const double O = trace.query_tiles[0].O(0, 0);
  ctx.print("O = U / l = {} / {} = {}; |O - 49/15| = {}.\n\n", num(b.U(0, 0)), num(b.l[0]),
            num(O, 17), num(std::abs(O - kExact), 3));
  // Tile B's own sums, recovered from the trace: what B added on top of alpha * A.
  const double l_B = b.l[0] - b.alpha[0] * a.l[0], U_B = b.U(0, 0) - b.alpha[0] * a.U(0, 0);
  ctx.print("The wrong shortcut: average the two tiles' own outputs, U_A/l_A = {} and\n"
            "U_B/l_B = {}, to get {}. {} tile B holds {} of the denominator\n"
            "l = {}, so its output must weigh that much, not 1/2.\n\n",
            num(a.U(0, 0) / a.l[0]), num(U_B / l_B), num(0.5 * (a.U(0, 0) / a.l[0] + U_B / l_B)),
            ctx.bad("Wrong:"), num(l_B / b.l[0]), num(b.l[0]));
}

// Scores of one long row, cut at random points into segments, each segment's state
// computed on its own, then merged in a random order: the answer is always the same.
void general_merge(LessonContext& ctx) {
  ctx.step("The general merge, in any order");
  ctx.say("Two states of the same query over disjoint keys merge exactly:\n"
          "  m = max(m_A, m_B), alpha = exp(m_A - m), beta = exp(m_B - m),\n"
          "  l = alpha l_A + beta l_B,  U = alpha U_A + beta U_B.\n"
          "Below, one row of 1000 random scores is cut into segments; each segment's state is\n"
          "computed alone; the states are merged left to right and in a shuffled order.\n\n");
  constexpr Index kKeys = 1000, kD = 3;
  constexpr std::uint64_t kSeed = 7;
  std::mt19937_64 gen(kSeed);
  std::uniform_real_distribution<double> score(-20.0, 20.0), value(-1.0, 1.0);
  cpu::Matrix<double> S(1, kKeys), V(kKeys, kD);
  for (Index j = 0; j < kKeys; ++j) {
    S(0, j) = score(gen);
    for (Index c = 0; c < kD; ++c) V(j, c) = value(gen);
  }
  const cpu::Vector<double> p = cpu::stable_softmax<double>(S.row(0).transpose());
  const cpu::Matrix<double> exact = p.transpose() * V;  // (1, d)

  Table t({"segments", "left to right: max error", "shuffled: max error"});
  for (Index segments : {2, 7, 50, 1000}) {
    std::vector<cpu::SoftmaxState<double>> states;
    for (Index s = 0; s < segments; ++s) {
      const Index k0 = s * kKeys / segments, k1 = (s + 1) * kKeys / segments;
      states.push_back(cpu::tile_state<double, double>(S.middleCols(k0, k1 - k0),
                                                       V.middleRows(k0, k1 - k0)));
    }
    const auto fold = [&](const std::vector<cpu::SoftmaxState<double>>& xs) {
      auto acc = cpu::SoftmaxState<double>::empty(1, kD);
      for (const auto& x : xs) acc = cpu::merge(acc, x);
      return (cpu::finalize(acc).O - exact).cwiseAbs().maxCoeff();
    };
    const double ordered = fold(states);
    std::shuffle(states.begin(), states.end(), gen);
    t.add({fmt::format("{}", segments), num(ordered, 3), num(fold(states), 3)});
  }
  ctx.table(t);
  ctx.say("The errors are rounding (fp64 carries 16 digits), whatever the cut and the order.\n"
          "This is what lets FlashAttention see K and V one tile at a time (lesson 3) and\n"
          "lets decode split a long KV cache across many blocks (lesson 10).\n\n");
}

}  // namespace

void run_lesson_02(LessonContext& ctx) {
  full_formula(ctx);
  one_key_at_a_time(ctx);
  two_tiles(ctx);
  general_merge(ctx);
  ctx.finish("lesson 3 applies the same state to a block of queries: the tiled forward pass.");
}

}  // namespace flashlab::app

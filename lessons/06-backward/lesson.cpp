// Lesson 6: the backward pass with recomputation: D = rowsum(dO o O), P rebuilt from L
// tile by tile, and what keeping L instead of P saves and costs; then the same on a GPU
// (gpu_backward.cpp).
#include "06-backward/gpu_backward.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive_backward.hpp"

#include <cmath>

namespace flashlab::app {

namespace {

constexpr Index kN = 97, kD = 59;  // awkward on purpose: tiles of 16 do not divide either
constexpr std::uint64_t kSeed = 6;

struct Problem {
  cpu::Matrix<double> Q, K, V, dO;
};

Problem make_problem() {
  const auto in = random_inputs({.N = kN, .d = kD, .seed = kSeed});
  const auto grad = random_inputs({.N = kN, .d = kD, .seed = kSeed + 1});
  return {in.Q.cast<double>(), in.K.cast<double>(), in.V.cast<double>(), grad.Q.cast<double>()};
}

void what_is_kept(LessonContext& ctx) {
  ctx.step("What the forward pass keeps");
  ctx.say("Training needs the gradients of a loss with respect to Q, K and V, given dO, its\n"
          "gradient with respect to the output. Those formulas use P. The forward pass could\n"
          "store P (N x N) but does not: it keeps O and one number per row,\n"
          "  L_i = m_i + log l_i = log sum_j exp(S_ij),\n"
          "from which any entry of P comes back with one subtraction and one exp:\n"
          "  P_ij = exp(S_ij - L_i)   (no max and no sum needed: L holds both).\n\n");
  const auto p = make_problem();
  cpu::AttentionOptions options;
  options.tiles = {16, 16};
  const auto fwd = cpu::forward_q_outer<double>(p.Q, p.K, p.V, options);
  const auto ref = cpu::naive_backward<double>(p.Q, p.K, p.V, p.dO);
  // Rebuild P from L and a fresh S, and compare with the P the naive pass materialised.
  const double scale = 1.0 / std::sqrt(double(kD));
  const cpu::Matrix<double> S = p.Q * p.K.transpose() * scale;
  const cpu::Matrix<double> P = (S.colwise() - fwd.L).array().exp().matrix();
  ctx.print("N = {}, d = {}, fp64: max |exp(S - L) - P| = {}.\n\n", kN, kD,
            num((P - ref.P).cwiseAbs().maxCoeff(), 3));
}

void the_D_trick(LessonContext& ctx) {
  ctx.step("D = rowsum(dO o O): the softmax's backward without P");
  ctx.say("The softmax's backward is dS_ij = P_ij (dP_ij - D_i) with D_i = sum_j P_ij dP_ij and\n"
          "dP = dO V^T. D looks like it needs a whole row of P. But\n"
          "  D_i = sum_j P_ij (dO_i . V_j) = dO_i . (sum_j P_ij V_j) = dO_i . O_i,\n"
          "one dot product of two d-vectors the backward already has.\n\n");
  const auto p = make_problem();
  const auto ref = cpu::naive_backward<double>(p.Q, p.K, p.V, p.dO);
  const cpu::Vector<double> D = cpu::compute_D<double>(p.dO, ref.O);
  ctx.print("rowsum(P o dP) the long way vs rowsum(dO o O): max difference {} over {} rows;\n"
            "O(N d) work instead of O(N^2 d).\n\n",
            num((D - ref.D).cwiseAbs().maxCoeff(), 3), kN);
}

void tiled_backward(LessonContext& ctx) {
  ctx.step("The tiled backward matches the naive one");
  ctx.say("FlashAttention-2's backward puts KV tiles outside: each keeps dK_j and dV_j on chip\n"
          "while it sweeps the query tiles, rebuilding S_ij and P_ij = exp(S_ij - L_i):\n"
          "  dV_j += P_ij^T dO_i;  dP_ij = dO_i V_j^T;  dS_ij = P_ij o (dP_ij - D_i)\n"
          "  dQ_i += dS_ij K_j scale (accumulated in memory);  dK_j += dS_ij^T Q_i scale\n\n");
  const auto p = make_problem();
  cpu::AttentionOptions options;
  Table t({"causal", "Br", "Bc", "tiles", "max |dQ err|", "max |dK err|", "max |dV err|"});
  for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
    options.causal = causal;
    const auto naive = cpu::naive_backward<double>(p.Q, p.K, p.V, p.dO, options);
    for (const auto [Br, Bc] : {std::pair<Index, Index>{16, 16}, {32, 8}}) {
      options.tiles = {Br, Bc};
      const auto fwd = cpu::forward_q_outer<double>(p.Q, p.K, p.V, options);
      const auto g = cpu::backward_kv_outer<double>(p.Q, p.K, p.V, fwd.O, fwd.L, p.dO, options);
      const auto err = [](const auto& a, const auto& b) { return num((a - b).cwiseAbs().maxCoeff(), 3); };
      t.add({std::string(cpu::to_string(causal)), fmt::format("{}", Br), fmt::format("{}", Bc),
             fmt::format("{}", g.tiles.computed), err(g.dQ, naive.dQ), err(g.dK, naive.dK),
             err(g.dV, naive.dV)});
    }
  }
  ctx.table(t);
  ctx.say("The differences are fp64 rounding: the tiled pass never formed P, dP or dS whole.\n\n");
}

void memory_and_flops(LessonContext& ctx) {
  ctx.step("The bargain: memory saved, FLOPs added");
  constexpr double N = 8192, d = 128, heads = 32, kBf16 = 2, kFp32 = 4, kMiB = 1 << 20;
  Table t({"kept for the backward", "per head", "32 heads"}, {true});
  t.add({"P (N x N, bf16)", fmt::format("{:.0f} MiB", N * N * kBf16 / kMiB),
         fmt::format("{:.0f} MiB", heads * N * N * kBf16 / kMiB)});
  t.add({"L (N, fp32)", fmt::format("{:.0f} KiB", N * kFp32 / 1024),
         fmt::format("{:.0f} KiB", heads * N * kFp32 / 1024)});
  ctx.print("At N = {:.0f}, d = {:.0f}:\n\n", N, d);
  ctx.table(t);
  // Matrix FLOPs, 2 per multiply-add: each (N, N, d) product costs 2 N^2 d.
  const double product = 2 * N * N * d;
  Table f({"pass", "products", "matrix FLOPs", "vs forward"}, {true, true});
  const auto row = [&](std::string pass, std::string what, int products) {
    f.add({std::move(pass), std::move(what), num(products * product, 3),
           fmt::format("{:.1f}x", products / 2.0)});  // the forward has two products
  };
  row("forward", "S = QK^T, O = PV", 2);
  row("backward, P stored", "dV, dP, dQ, dK", 4);
  row("backward, recomputed", "S again, dV, dP, dQ, dK", 5);
  ctx.table(f);
  ctx.say("Recomputation adds one product of five (and N^2 exponentials) to the backward, and\n"
          "removes an N^2 tensor from memory and from HBM traffic. A backward that reads P is\n"
          "memory bound, so the FlashAttention paper found the recomputing one faster too.\n"
          "(The 2.5x is the ratio ANCHORS.md uses for backward TFLOP/s.)\n\n");
}

}  // namespace

void run_lesson_06(LessonContext& ctx) {
  if (lesson6_measure_child()) return;
  what_is_kept(ctx);
  the_D_trick(ctx);
  tiled_backward(ctx);
  memory_and_flops(ctx);
  gpu_backward_step(ctx);
  ctx.finish("lesson 7: how FlashAttention-2 splits a tile's work between warps.");
}

}  // namespace flashlab::app

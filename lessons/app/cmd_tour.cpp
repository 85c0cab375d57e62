// `flashlab tour`: the first thing a newcomer runs. Two stops:
//   1. the worked example (exponentials 1, 2, 4, 8 over V = 1, 2, 3, 4) traced tile by tile
//      through the online-softmax state, ending at exactly 49/15;
//   2. what the three-operator baseline stores and moves at N = 8192, d = 128 in bf16,
//      against the O(N) state that the tiled algorithm keeps instead.
#include "commands.hpp"

#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <fmt/core.h>

#include <cmath>

namespace flashlab::app {

namespace {

using cpu::Index;
using cpu::Matrix;

constexpr double kMiB = 1024.0 * 1024.0;

void tour_worked_example() {
  fmt::print("1. Online softmax on the worked example\n\n");
  fmt::print("   One query, four keys. Its exponentiated scores exp(S) are 1, 2, 4, 8 and the\n"
             "   values are V = 1, 2, 3, 4, so the answer is\n"
             "     O = (1*1 + 2*2 + 4*3 + 8*4) / (1 + 2 + 4 + 8) = 49/15 = {:.15f}\n\n",
             49.0 / 15.0);
  fmt::print("   The tiled algorithm sees the keys two at a time (Bc = 2) and keeps only the\n"
             "   state (m, l, u): the running max, the sum of exp(S - m), the weighted sum of V.\n\n");

  Matrix<double> Q(1, 1), K(4, 1), V(4, 1);
  Q << 1.0;
  K << std::log(1.0), std::log(2.0), std::log(4.0), std::log(8.0);  // S = log of 1, 2, 4, 8
  V << 1, 2, 3, 4;
  cpu::AttentionOptions options;
  options.scale = 1.0;
  options.tiles = {1, 2};

  fmt::print("   {:<10} {:>14} {:>10} {:>8} {:>8} {:>8} {:>8}\n", "KV tile", "exp(S) tile",
             "exp(m')", "alpha", "l", "u", "u/l");
  const auto result = cpu::forward_q_outer<double>(Q, K, V, options, [](const cpu::TileEvent<double>& e) {
    const Index cols = e.S->cols();
    const std::string tile = fmt::format("{:g}, {:g}", std::exp((*e.S)(0, 0)),
                                         std::exp((*e.S)(0, cols - 1)));
    fmt::print("   {:<10} {:>14} {:>10.4g} {:>8.4g} {:>8.4g} {:>8.4g} {:>8.4f}\n",
               fmt::format("keys {}-{}", e.k0 + 1, e.k0 + cols), tile, std::exp(e.step->m_new[0]),
               e.step->alpha[0], e.state->l[0], e.state->U(0, 0),
               e.state->U(0, 0) / e.state->l[0]);
  });
  fmt::print("\n   After the first tile the base is m = log 2, so the weights are 1/2 and 1.\n"
             "   The second tile raises the max to log 8: alpha = exp(log 2 - log 8) = 1/4\n"
             "   shrinks the old l and u to the new base before the new weights are added:\n"
             "     l = 1.5/4 + 1.5 = 1.875,  u = 2.5/4 + 5.5 = 6.125,  O = u / l = {:.15f}\n",
             result.O(0, 0));
  fmt::print("   Averaging the two tiles' own outputs instead (2.5/1.5 and 5.5/1.5) would give\n"
             "   {:.4f}: wrong, because the right tile holds 12/15 of the denominator.\n\n",
             0.5 * (2.5 / 1.5 + 5.5 / 1.5));
}

void tour_memory() {
  constexpr Index N = 8192, d = 128, heads = 32;
  constexpr double bf16_bytes = 2, fp32_bytes = 4;
  const double per_matrix = double(N) * N * bf16_bytes / kMiB;  // S or P: (N, N)
  const double per_input = double(N) * d * bf16_bytes / kMiB;   // Q, K, V or O: (N, d)
  const double state = 2.0 * N * fp32_bytes / 1024.0;            // m and l, fp32, in KiB

  fmt::print("2. What the three-operator baseline costs (N = {}, d = {}, bf16, one head)\n\n", N, d);
  fmt::print("   Q, K, V, O          {:>8.0f} MiB each   (N x d)\n", per_input);
  fmt::print("   S = Q K^T / sqrt(d) {:>8.0f} MiB        (N x N), written, then read back\n",
             per_matrix);
  fmt::print("   P = softmax(S)      {:>8.0f} MiB        (N x N), written, then read back\n",
             per_matrix);
  fmt::print("   -> {:.0f} MiB of intermediate HBM traffic per head, {:.0f} GiB of S and P\n"
             "      held at once for {} heads.\n\n",
             4 * per_matrix, 2 * per_matrix * heads / 1024.0, heads);
  fmt::print("   The tiled algorithm never writes S or P. Besides O it keeps, per query row,\n"
             "   m and l (fp32): {:.0f} KiB per head, and L = m + log l for the backward pass.\n"
             "   Its extra memory grows with N, not N^2; its arithmetic is still O(N^2 d).\n\n",
             state);
}

}  // namespace

void add_tour_command(CLI::App& app) {
  auto* tour = app.add_subcommand(
      "tour", "A short tour: the 49/15 example tile by tile, and what S and P cost");
  tour->callback([] {
    fmt::print("flashlab: FlashAttention computed three ways (CPU reference, memory simulator, GPU)\n\n");
    tour_worked_example();
    tour_memory();
    fmt::print("Next: `flashlab --help` lists every command; README.md says where to go from here.\n");
  });
}

}  // namespace flashlab::app

#include "tour/tour.hpp"

#include "gpu_bridge/kernels.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/sim/simulate.hpp"

#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <cmath>
#include <ostream>

namespace flashlab::app {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

void tour_worked_example(std::ostream& out) {
  fmt::print(out, "1. Online softmax on the worked example\n\n");
  fmt::print(out,
             "   One query, four keys. Its exponentiated scores exp(S) are 1, 2, 4, 8 and the\n"
             "   values are V = 1, 2, 3, 4, so the answer is\n"
             "     O = (1*1 + 2*2 + 4*3 + 8*4) / (1 + 2 + 4 + 8) = 49/15 = {:.15f}\n\n",
             49.0 / 15.0);
  fmt::print(
      out,
      "   The tiled algorithm sees the keys two at a time (Bc = 2) and keeps only the\n"
      "   state (m, l, U): the running max, the sum of exp(S - m), the weighted sum of V.\n\n");
  const TileTrace trace = trace_worked_example(/*kv_tile=*/2);
  fmt::print(out, "   {:<10} {:>14} {:>10} {:>8} {:>8} {:>8} {:>8}\n", "KV tile", "exp(rowmax S)",
             "exp(m')", "alpha", "l", "U", "U/l");
  for (const TileRecord& t : trace.tiles)
    fmt::print(out, "   {:<10} {:>14.4g} {:>10.4g} {:>8.4g} {:>8.4g} {:>8.4g} {:>8.4f}\n",
               "keys " + index_range(t.k0, t.cols), std::exp(t.tile_max[0]), std::exp(t.m[0]),
               t.alpha[0], t.l[0], t.U(0, 0), t.U(0, 0) / t.l[0]);
  fmt::print(out,
             "\n   After the first tile the base is m = log 2, so the weights are 1/2 and 1.\n"
             "   The second tile raises the max to log 8: alpha = exp(log 2 - log 8) = 1/4\n"
             "   shrinks the old l and U to the new base before the new weights are added:\n"
             "     l = 1.5/4 + 1.5 = 1.875,  U = 2.5/4 + 5.5 = 6.125,  O = U / l = {:.15f}\n",
             trace.query_tiles.front().O(0, 0));
  fmt::print(out,
             "   Averaging the two tiles' own outputs instead (2.5/1.5 and 5.5/1.5) would give\n"
             "   {:.4f}: wrong, because the right tile holds 12/15 of the denominator.\n\n",
             0.5 * (2.5 / 1.5 + 5.5 / 1.5));
}

// What FlashAttention-2 writes to HBM, from the simulator's count of the same problem: O and,
// per query row, L = m + log l; the running m and l never leave the chip.
void tour_fa2_outputs(std::ostream& out, Index N, Index d) {
  const sim::Report fa2 = sim::count(
      sim::Algorithm::fa2,
      fa2_kernel_problem(
          {.N = N, .d = d, .dtype = sim::DType::bf16, .sram_bytes = target_profile().sram_per_sm}));
  std::vector<std::string> written;
  for (const sim::TensorTraffic& t : fa2.tensors)
    if (t.written > 0) written.push_back(t.name);
  fmt::print(out,
             "   FlashAttention-2 never writes S or P. The running max m and sum l of a query\n"
             "   row stay on chip while its query tile sweeps K and V; what it writes to HBM is\n"
             "   {}: O, and per query row L = m + log l (fp32), {:.0f} KiB per head, kept for\n"
             "   the backward pass. (FlashAttention-1 wrote m and l to HBM after every KV tile.)\n"
             "   Its extra memory grows with N, not N^2; its arithmetic is still O(N^2 d).\n\n",
             fmt::join(written, " and "), double(fa2.tensor("L").written) / 1024.0);
}

void tour_memory(std::ostream& out) {
  constexpr Index N = 8192, d = 128, heads = 32;
  constexpr double bf16_bytes = 2;
  const double per_matrix = double(N) * N * bf16_bytes / kMiB;  // S or P: (N, N)
  const double per_input = double(N) * d * bf16_bytes / kMiB;   // Q, K, V or O: (N, d)

  fmt::print(out, "2. What the three-operator baseline costs (N = {}, d = {}, bf16, one head)\n\n",
             N, d);
  fmt::print(out, "   Q, K, V, O          {:>8.0f} MiB each   (N x d)\n", per_input);
  fmt::print(out, "   S = Q K^T / sqrt(d) {:>8.0f} MiB        (N x N), written, then read back\n",
             per_matrix);
  fmt::print(out, "   P = softmax(S)      {:>8.0f} MiB        (N x N), written, then read back\n",
             per_matrix);
  fmt::print(out,
             "   -> {:.0f} MiB of intermediate HBM traffic per head, {:.0f} GiB of S and P\n"
             "      held at once for {} heads.\n\n",
             4 * per_matrix, 2 * per_matrix * heads / 1024.0, heads);
  tour_fa2_outputs(out, N, d);
}

}  // namespace

void run_tour(std::ostream& out) {
  fmt::print(
      out,
      "flashlab: FlashAttention computed three ways (CPU reference, memory simulator, GPU)\n\n");
  tour_worked_example(out);
  tour_memory(out);
  fmt::print(
      out, "Next: `flashlab --help` lists every command; README.md says where to go from here.\n");
}

}  // namespace flashlab::app

// Where K and V stop fitting the L2 between one wave of blocks and the next: the closed form
// of grid.hpp, live(N) = 2 N d s + (h(N) - 1) x 2 (N - Bc) d s + ceil(R / P) x (2 Br d s +
// 4 Br), and the smallest N at which it exceeds one partition of the L2 (L2 / P). Arithmetic
// over the waves' block ranges; nothing is simulated.
#include "flashlab/sim/grid.hpp"

#include "flashlab/cpu/checked.hpp"

#include <algorithm>

namespace flashlab::sim {

using cpu::Index;

namespace {
// The blocks of a wave of R whose Q, O and L one partition holds: ceil(R / P).
Index wave_blocks_per_partition(const GridProblem& p) {
  return cpu::tile_count(p.resident_blocks(), p.l2_partitions);
}
}  // namespace

Index reread_heads(const GridProblem& p) {
  check(p);
  const Index R = p.resident_blocks(), blocks = p.blocks(), Tr = p.query_tiles();
  const Index group = p.heads / p.kv_head_count();
  const auto kv_head = [&](Index block) { return block / Tr / group; };
  // Wave w runs blocks [w R, (w + 1) R): KV heads kv_head(first) .. kv_head(last), in order.
  Index h = 0;
  for (Index first = 0; first + R < blocks; first += R) {
    const Index last = first + R - 1, next_last = std::min(first + 2 * R, blocks) - 1;
    if (kv_head(last) != kv_head(first + R)) continue;  // no KV head spans the two waves
    const Index here = kv_head(last) - kv_head(first) + 1;
    const Index there = kv_head(next_last) - kv_head(first + R) + 1;
    h = std::max({h, here, there});
  }
  return h;
}

Bytes live_bytes(const GridProblem& p) {
  const Index h = reread_heads(p);
  if (h == 0) return 0;
  const Bytes s = bytes_of(p.dtype), acc = bytes_of(kAccumulator);
  // The re-read head's K and V whole (the re-read tile included), and the others' but one
  // tile each: the tile at the same step, which the worst re-read (the first or the last
  // step) has not touched since.
  const Bytes kv = cpu::checked_add(
      cpu::checked_product({2, p.N, p.d, s}, "the live K and V"),
      cpu::checked_product({h - 1, 2, std::max<Index>(0, p.N - p.Bc), p.d, s}, "the live K and V"),
      "the live K and V");
  const Bytes tiles = cpu::checked_product({wave_blocks_per_partition(p), p.Br, 2 * p.d * s + acc},
                                           "a wave's Q, O and L tiles");
  return kv + tiles;
}

std::optional<L2Crossover> l2_crossover(const GridProblem& problem) {
  if (problem.causal != cpu::Causal::none)
    throw cpu::InvalidArgument(
        "the L2 crossover's closed form is the non-causal grid's: give causal none, or run "
        "the causal grid through run_grid");
  GridProblem p = problem;
  p.N = 1;
  check(p);
  constexpr Index kMaxN = Index{1} << 22;
  // From one_head_N on, live(N) > L2 whenever some KV head spans two waves (h >= 1); above
  // R Br (Tr > R) every head does. The scan for the first crossing can stop past both.
  const Bytes s = bytes_of(p.dtype);
  const Index R = cpu::checked_mul(p.sm_count, p.blocks_per_sm, "the resident blocks");
  const Bytes wave_tiles =
      cpu::checked_product({cpu::tile_count(R, p.l2_partitions), p.Br,
                            2 * p.d * s + bytes_of(kAccumulator)},
                           "a wave's Q, O and L tiles");
  const Index one_head =
      std::max<Index>(0, p.partition_bytes() - wave_tiles) / (2 * p.d * s) / p.Bc * p.Bc + p.Bc;
  const Index last = std::min(kMaxN, std::max(one_head, cpu::checked_mul(R, p.Br, "R Br") + p.Bc));
  for (p.N = p.Bc; p.N <= last; p.N += p.Bc) {
    const Bytes live = live_bytes(p);
    if (live > p.partition_bytes())
      return L2Crossover{p.N, reread_heads(p), live, std::min(one_head, kMaxN)};
  }
  return std::nullopt;
}

}  // namespace flashlab::sim

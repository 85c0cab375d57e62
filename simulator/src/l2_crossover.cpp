// Where K and V stop fitting the L2 between one wave of blocks and the next: the closed form
// of grid.hpp, live(N) = 2 N d s + (h(N) - 1) x 2 (N - Bc) d s + the Q, O and L tiles one
// partition holds (ceil(R / P) x (2 Br d s + 4 Br) between full waves), and the smallest N
// at which it exceeds one partition of the L2 (L2 / P). Arithmetic over the waves' block
// ranges; nothing is simulated.
#include "flashlab/sim/grid.hpp"

#include "flashlab/cpu/checked.hpp"

#include <algorithm>
#include <vector>

namespace flashlab::sim {

using cpu::Index;

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
  // In the partition that holds the most of them: one wave's O and L, and the Q of the wave
  // after it (fewer blocks where that is the grid's last), over the waves that share a head.
  const Index R = p.resident_blocks(), blocks = p.blocks(), P = p.l2_partitions;
  const Index Tr = p.query_tiles(), group = p.heads / p.kv_head_count();
  const auto rows = [&](Index block) { return std::min(p.Br, p.N - block % Tr * p.Br); };
  Bytes tiles = 0;
  for (Index first = 0; first + R < blocks; first += R) {
    if ((first + R - 1) / Tr / group != (first + R) / Tr / group) continue;
    std::vector<Bytes> in_part(P, 0);
    for (Index b = first; b < first + R; ++b)  // O (s bytes) and L (acc) of each row
      in_part[p.partition_of(b)] += rows(b) * (p.d * s + acc);
    for (Index b = first + R; b < std::min(first + 2 * R, blocks); ++b)  // Q
      in_part[p.partition_of(b)] += rows(b) * p.d * s;
    tiles = std::max(tiles, *std::max_element(in_part.begin(), in_part.end()));
  }
  return kv + tiles;
}

std::optional<L2Crossover> l2_crossover(const GridProblem& problem) {
  if (problem.causal != cpu::Causal::none)
    throw cpu::InvalidArgument(
        "the L2 crossover's closed form is the non-causal grid's: give causal none, or run "
        "the causal grid through run_grid");
  if (problem.order)
    throw cpu::InvalidArgument(
        "the L2 crossover's closed form is for blocks in grid order: run a kernel's own order "
        "through run_grid");
  GridProblem p = problem;
  p.N = 1;
  check(p);
  constexpr Index kMaxN = Index{1} << 22;
  // From one_head_N on, live(N) > L2 / P whenever some KV head spans two full waves; above
  // 2 R Br (Tr > 2 R) every head does. The scan for the first crossing can stop past both.
  const Bytes s = bytes_of(p.dtype);
  const Index R = cpu::checked_mul(p.sm_count, p.blocks_per_sm, "the resident blocks");
  const Bytes wave_tiles = cpu::checked_product(
      {cpu::tile_count(R, p.l2_partitions), p.Br, 2 * p.d * s + bytes_of(kAccumulator)},
      "a wave's Q, O and L tiles");
  const Index one_head =
      std::max<Index>(0, p.partition_bytes() - wave_tiles) / (2 * p.d * s) / p.Bc * p.Bc + p.Bc;
  const Index last =
      std::min(kMaxN, std::max(one_head, cpu::checked_product({2, R, p.Br}, "2 R Br") + p.Bc));
  for (p.N = p.Bc; p.N <= last; p.N += p.Bc) {
    const Bytes live = live_bytes(p);
    if (live > p.partition_bytes())
      return L2Crossover{p.N, reread_heads(p), live, std::max(p.N, std::min(one_head, kMaxN))};
  }
  return std::nullopt;
}

}  // namespace flashlab::sim

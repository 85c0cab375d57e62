// Where K and V stop fitting the L2 between one wave of blocks and the next: the closed form
// of grid.hpp, live(N) = 2 N d s + (h(N) - 1) x 2 (N - Bc) d s + the Q, O and L tiles one
// partition holds, taken per partition (its own blocks' heads and tiles under the grid's
// placement) and over the partitions that hold a shared head's tiles the least, and the
// smallest N at which it exceeds one partition of the L2 (L2 / P). Arithmetic over the waves'
// block ranges; nothing is simulated.
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/limits.hpp"

#include "flashlab/cpu/checked.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace flashlab::sim {

using cpu::Index;

namespace {

// live(N) and h(N) as the closed form counts them: over the pairs of waves that share a KV
// head, the worst pair; within a pair, each partition that holds the shared head's tiles (its
// blocks of the first wave read them) holds its own blocks' heads and tiles, and the tile
// reaches DRAM again only once every such partition has lost it (a side that loses a tile
// takes it back from another side that still holds it), so the pair counts the least of them.
struct Live {
  Bytes bytes = 0;
  Index heads = 0;
};

Live worst_pair(const GridProblem& p) {
  check(p);
  if (p.pass != GridPass::forward)
    throw cpu::InvalidArgument(fmt::format(
        "the L2 crossover's closed form is the forward grid's: run the {} pass through run_grid",
        to_string(p.pass)));
  const Index R = p.resident_blocks(), blocks = p.blocks(), Tr = p.query_tiles();
  const Index group = p.heads / p.kv_head_count(), P = p.l2_partitions;
  const auto kv_head = [&](Index block) { return block / Tr / group; };
  const auto rows = [&](Index block) { return std::min(p.Br, p.queries() - block % Tr * p.Br); };
  const Bytes s = bytes_of(p.dtype), acc = bytes_of(kAccumulator);
  Live worst;
  // Wave w runs blocks [w R, (w + 1) R): KV heads kv_head(first) .. kv_head(last), in order.
  for (Index first = 0; first + R < blocks; first += R) {
    const Index shared = kv_head(first + R), end = std::min(first + 2 * R, blocks);
    if (kv_head(first + R - 1) != shared) continue;  // no KV head spans the two waves
    // Per partition: the distinct KV heads its blocks read in each wave (blocks run in head
    // order, so a head is new where it differs from the last one seen there), whether it
    // holds the shared head, and its tiles: one wave's O and L and the next wave's Q.
    std::vector<Index> here(P, 0), there(P, 0), last_here(P, -1), last_there(P, -1);
    std::vector<Bytes> tiles(P, 0);
    std::vector<bool> holds(P, false);
    for (Index b = first; b < end; ++b) {
      const auto q = std::size_t(p.partition_of(b));
      const Index h = kv_head(b);
      const bool first_wave = b < first + R;
      auto& count = first_wave ? here[q] : there[q];
      auto& last = first_wave ? last_here[q] : last_there[q];
      if (h != last) ++count, last = h;
      if (first_wave && h == shared) holds[q] = true;
      tiles[q] += rows(b) * (first_wave ? p.d * s + acc : p.d * s);  // O and L, or Q
    }
    std::optional<Live> pair;  // the least full partition holding the shared head
    for (std::size_t q = 0; q < std::size_t(P); ++q) {
      if (!holds[q]) continue;
      const Index h = std::max(here[q], there[q]);
      // The shared head's K and V whole (the re-read tile included), and the others' but one
      // tile each: the tile at the same step, which the worst re-read (the first or the last
      // step) has not touched since.
      const Bytes kv = cpu::checked_add(
          cpu::checked_product({2, p.N, p.d, s}, "the live K and V"),
          cpu::checked_product({h - 1, 2, std::max<Index>(0, p.N - p.Bc), p.d, s},
                               "the live K and V"),
          "the live K and V");
      const Bytes live = cpu::checked_add(kv, tiles[q], "the live bytes");
      if (!pair || live < pair->bytes) pair = Live{live, h};
    }
    if (pair && pair->bytes > worst.bytes) worst = *pair;
  }
  return worst;
}

}  // namespace

Index reread_heads(const GridProblem& p) { return worst_pair(p).heads; }

Bytes live_bytes(const GridProblem& p) { return worst_pair(p).bytes; }

std::optional<L2Crossover> l2_crossover(const GridProblem& problem) {
  if (problem.causal != cpu::Causal::none)
    throw cpu::InvalidArgument(
        "the L2 crossover's closed form is the non-causal grid's: give causal none, or run "
        "the causal grid through run_grid");
  if (problem.order)
    throw cpu::InvalidArgument(
        "the L2 crossover's closed form is for blocks in grid order: run a kernel's own order "
        "through run_grid");
  if (problem.N_q != 0 && problem.N_q != problem.N)
    throw cpu::InvalidArgument(fmt::format(
        "N_q = {} with N = {}: the L2 crossover scans N with as many queries as keys; give "
        "N_q = 0, or take live_bytes at the shape",
        problem.N_q, problem.N));
  GridProblem p = problem;
  p.N = 1;
  p.N_q = 0;
  check(p);
  // From one_head_N on, live(N) > L2 / P whenever some KV head spans two full waves; above
  // 2 R Br (Tr > 2 R) every head does. The scan for the first crossing can stop past both.
  const Bytes s = bytes_of(p.dtype);
  const Index R = cpu::checked_mul(p.sm_count, p.blocks_per_sm, "the resident blocks");
  // A wave's slots on the emptiest partition that has any (block b runs in slot b mod R): the
  // side that keeps a shared head's tiles longest.
  std::vector<Index> slots_in(std::size_t(p.l2_partitions), 0);
  for (Index b = 0; b < R; ++b) ++slots_in[std::size_t(p.partition_of(b))];
  Index emptiest = R;
  for (const Index n : slots_in)
    if (n > 0) emptiest = std::min(emptiest, n);
  const Bytes wave_tiles = cpu::checked_product(
      {emptiest, p.Br, 2 * p.d * s + bytes_of(kAccumulator)}, "a wave's Q, O and L tiles");
  const Index one_head =
      std::max<Index>(0, p.partition_bytes() - wave_tiles) / (2 * p.d * s) / p.Bc * p.Bc + p.Bc;
  const Index last =
      std::min(kMaxLength, std::max(one_head, cpu::checked_product({2, R, p.Br}, "2 R Br") + p.Bc));
  for (p.N = p.Bc; p.N <= last; p.N += p.Bc) {
    const Live live = worst_pair(p);
    if (live.bytes > p.partition_bytes())
      return L2Crossover{p.N, live.heads, live.bytes,
                         std::max(p.N, std::min(one_head, kMaxLength))};
  }
  return std::nullopt;
}

}  // namespace flashlab::sim

#include "flashlab/cpu/ring_schedule.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/score_tile.hpp"

#include <algorithm>
#include <sstream>
#include <string>

namespace flashlab::cpu {

std::string_view to_string(RingLayout layout) {
  switch (layout) {
    case RingLayout::contiguous: return "contiguous";
    case RingLayout::zigzag: return "zigzag";
  }
  return "invalid";
}

Chunk chunk_of(Index c, Index chunks, Index n) {
  // c n / chunks without forming c n, which overflows for n near 2^63: n = a chunks + b.
  const auto start = [&](Index i) { return i * (n / chunks) + i * (n % chunks) / chunks; };
  const Index begin = start(c);
  return {begin, start(c + 1) - begin};
}

void check_ranks(Index ranks, Index n_q, Index n_k, RingLayout layout) {
  if (layout != RingLayout::contiguous && layout != RingLayout::zigzag) {
    throw InvalidArgument("ring layout " + std::to_string(static_cast<int>(layout)) +
                          " is not a layout: use RingLayout::contiguous or RingLayout::zigzag");
  }
  const Index n = std::min(n_q, n_k);
  if (ranks >= 1 && ranks <= n) return;
  std::ostringstream why;
  why << "ring of P = " << ranks << " ranks over N_q = " << n_q << " queries and N_k = " << n_k
      << " keys: P must be between 1 and min(N_q, N_k) = " << n
      << " (every rank holds at least one query and one key)";
  throw InvalidArgument(why.str());
}

std::vector<Chunk> rank_slice(Index rank, Index ranks, Index n, RingLayout layout) {
  if (rank < 0 || rank >= ranks) {
    throw InvalidArgument("rank " + std::to_string(rank) + " of a ring of " +
                          std::to_string(ranks) + ": a rank is in [0, P)");
  }
  if (layout == RingLayout::contiguous) return {chunk_of(rank, ranks, n)};
  const Index chunks = checked_mul(Index{2}, ranks, "the zigzag layout's chunk count");
  return {chunk_of(rank, chunks, n), chunk_of(chunks - 1 - rank, chunks, n)};
}

Index kv_source(Index rank, Index step, Index ranks) {
  return ((rank - step) % ranks + ranks) % ranks;
}

TileCounts pair_tiles(const std::vector<Chunk>& q, const std::vector<Chunk>& k, const Mask& mask,
                      TileSizes tiles) {
  TileCounts counts;
  for (const Chunk& qc : q) {
    for (Index i = 0; i < tile_count(qc.rows, tiles.Br); ++i) {
      const Index q0 = qc.begin + i * tiles.Br, rows = std::min(tiles.Br, qc.rows - i * tiles.Br);
      for (const Chunk& kc : k) {
        for (Index j = 0; j < tile_count(kc.rows, tiles.Bc); ++j) {
          const Index k0 = kc.begin + j * tiles.Bc,
                      cols = std::min(tiles.Bc, kc.rows - j * tiles.Bc);
          count_tile(counts, mask.classify(q0, rows, k0, cols));
        }
      }
    }
  }
  return counts;
}

Index RingWork::computed(Index rank) const {
  Index sum = 0;
  for (Index s = 0; s < ranks; ++s) sum += at(rank, s).computed;
  return sum;
}

RingWork& RingWork::operator+=(const RingWork& other) {
  if (tiles.empty()) return *this = other;
  for (size_t i = 0; i < tiles.size(); ++i) tiles[i] += other.tiles[i];
  return *this;
}

RingWork ring_work(Index n_q, Index n_k, Index ranks, RingLayout layout,
                   const AttentionOptions& options) {
  check_shapes(n_q, 1, n_k, 1, n_k, 1, options);
  check_ranks(ranks, n_q, n_k, layout);
  const Mask mask{options.causal, n_q, n_k};
  RingWork work{ranks, std::vector<TileCounts>(static_cast<size_t>(ranks * ranks))};
  for (Index r = 0; r < ranks; ++r) {
    const auto q = rank_slice(r, ranks, n_q, layout);
    for (Index s = 0; s < ranks; ++s)
      work.at(r, s) = pair_tiles(q, rank_slice(kv_source(r, s, ranks), ranks, n_k, layout), mask,
                                 options.tiles);
  }
  return work;
}

}  // namespace flashlab::cpu

// Ring attention's schedule (context parallelism over P ranks): which rows of Q, K, V each
// rank holds, whose K/V slice it holds at each of the P steps, and how many score tiles it
// computes there. No numerics: ring.hpp runs the algorithm on this schedule.
//
// The sequence is cut into chunks; rank r holds
//   contiguous: chunk r of P                          (the natural split)
//   zigzag:     chunks r and 2P - 1 - r of 2P         (one early chunk, one late chunk)
// At step s, rank r holds the K/V slice that rank (r - s) mod P started with: after each
// step every rank passes the slice it holds to rank r + 1, so after P steps every Q slice
// has met every K/V slice once, and each K/V slice has crossed P - 1 links.
//
// Causal work. With chunks of c rows and square tiles of B rows dividing c, t = c / B, a
// pair of chunks costs t^2 tiles below the diagonal, t (t + 1) / 2 on it, 0 above it.
//   contiguous (c = N / P):  rank r computes r t^2 + t (t + 1) / 2 tiles: the last rank
//                            does about 2P - 1 times the first one's work;
//   zigzag (c = N / 2P):     every rank computes (2P - 1) t^2 + t (t + 1) tiles: balanced.
#pragma once

#include "flashlab/cpu/options.hpp"

#include <string_view>
#include <vector>

namespace flashlab::cpu {

enum class RingLayout { contiguous, zigzag };

std::string_view to_string(RingLayout layout);

// Rows [begin, begin + rows) of the whole sequence.
struct Chunk {
  Index begin = 0;
  Index rows = 0;
};

// Chunk c of `chunks` near-equal chunks of n rows: [floor(c n / chunks), floor((c + 1) n /
// chunks)). Sizes differ by one at most; a chunk is empty only when chunks > n.
Chunk chunk_of(Index c, Index chunks, Index n);

// The chunks of a sequence of n rows that rank `rank` of `ranks` holds, in sequence order.
std::vector<Chunk> rank_slice(Index rank, Index ranks, Index n, RingLayout layout);

// The rank whose K/V slice rank `rank` holds at step `step`: (rank - step) mod ranks.
Index kv_source(Index rank, Index step, Index ranks);

// Throws InvalidArgument unless 1 <= ranks <= min(n_q, n_k) (every rank holds at least one
// query and one key in the contiguous layout) and layout is one of its two values.
void check_ranks(Index ranks, Index n_q, Index n_k, RingLayout layout);

// The score tiles of query rows `q` against keys `k` under `mask`, each pair of chunks tiled
// on its own in tiles of Br x Bc from the chunks' first rows.
TileCounts pair_tiles(const std::vector<Chunk>& q, const std::vector<Chunk>& k, const Mask& mask,
                      TileSizes tiles);

// Score tiles per (rank, step): what each rank computes while it holds each K/V slice.
struct RingWork {
  Index ranks = 0;
  std::vector<TileCounts> tiles;  // (ranks * ranks) row-major: [rank * ranks + step]

  TileCounts& at(Index rank, Index step) { return tiles[static_cast<size_t>(rank * ranks + step)]; }
  const TileCounts& at(Index rank, Index step) const {
    return tiles[static_cast<size_t>(rank * ranks + step)];
  }
  Index computed(Index rank) const;  // summed over the steps
  RingWork& operator+=(const RingWork& other);
};

// The work of a ring of `ranks` over N_q queries and N_k keys, counted without numerics
// (options gives the mask and the tile sizes). Throws as check_ranks and check_shapes do.
RingWork ring_work(Index n_q, Index n_k, Index ranks, RingLayout layout,
                   const AttentionOptions& options);

}  // namespace flashlab::cpu

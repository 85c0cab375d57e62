// A per-tile trace of the FlashAttention-2 forward pass: for every query tile Q_i and every
// KV tile K_j, V_j it sweeps, what the update did (rowmax of the scores, alpha) and the
// state (m, l, U) afterwards, with the HBM bytes the step moved. The numbers come from
// cpu_reference's forward_q_outer through its TileObserver; nothing is recomputed here.
#pragma once

#include "flashlab/cpu/forward.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app {

using cpu::Index;
using Bytes = std::int64_t;

// The one numbering of every trace, printed, in JSON and in the HTML viewer: query tiles i,
// KV tiles j, query rows and keys all count from 0, as the code indexes them, so query tile
// i holds rows i Br to i Br + Br - 1 and row r of the problem is row r everywhere.
inline constexpr std::string_view kNumbering =
    "query tiles i, KV tiles j, query rows and keys all count from 0";

// "first-last" for `count` consecutive indices from `first`, or "first" when count is 1.
std::string index_range(Index first, Index count);

// What to trace: a random problem of N tokens, head dimension d, in fp32.
struct TraceSetup {
  Index N = 24;
  Index d = 4;
  cpu::TileSizes tiles{4, 4};
  cpu::Causal causal = cpu::Causal::none;
  std::uint64_t seed = 0;
};

// One KV tile as one query tile saw it. Vectors hold one entry per query row of the tile.
struct TileRecord {
  Index i = 0, j = 0;        // query tile, KV tile
  Index q0 = 0, k0 = 0;      // first query row, first key
  Index rows = 0, cols = 0;  // Br and Bc, smaller for a ragged last tile
  cpu::TileKind kind = cpu::TileKind::full;
  std::vector<double> tile_max, alpha, m, l;  // (rows); empty for a skipped tile
  cpu::Matrix<double> U;                      // (rows, d); empty for a skipped tile
  Index rows_skipped = 0;    // rows wholly masked in this tile: their state is untouched
  Bytes read = 0;            // HBM -> SRAM in this step: K_j and V_j
};

// One query tile: its load, and its normalised result.
struct QueryTileRecord {
  Index i = 0, q0 = 0, rows = 0;
  Bytes read = 0;            // Q_i, loaded once before the sweep
  Bytes written = 0;         // O_i and L_i, stored once after it
  cpu::Matrix<double> O;     // (rows, d) U / l
  std::vector<double> L;     // (rows) m + log l
};

struct TileTrace {
  Index N_q = 0, N_k = 0, d = 0;
  cpu::TileSizes tile_sizes;
  cpu::Causal causal = cpu::Causal::none;
  std::string dtype;         // "fp32" or "fp64": the type computed in and stored as
  Bytes element_bytes = 0;   // of Q, K, V, O
  Bytes state_bytes = 0;     // of one entry of L (the accumulator type)
  std::string bytes_source;  // how the byte counts were obtained, said plainly
  std::vector<QueryTileRecord> query_tiles;
  std::vector<TileRecord> tiles;  // query tile by query tile, KV tiles in sweep order
  cpu::TileCounts counts;

  Bytes total_read() const;
  Bytes total_written() const;
  // The records of query tile i, in sweep order.
  std::vector<const TileRecord*> tiles_of(Index i) const;
};

// The random inputs of a setup: entries uniform in [-2, 2) from a 64-bit Mersenne Twister
// seeded with setup.seed, drawn Q first, then K, then V, row by row. The same on every
// platform (the standard fixes mt19937_64's output; the mapping to [-2, 2) is ours).
struct TraceInputs {
  cpu::Matrix<float> Q, K, V;  // (N, d) each
};
TraceInputs random_inputs(const TraceSetup& setup);

// The memory a trace of this setup holds: one record per pair of query tile and KV tile,
// each with its rows' tile max, alpha, m and l and their (rows, d) U, in fp64.
double trace_bytes(const TraceSetup& setup);
inline constexpr double kMaxTraceBytes = 256.0 * 1024 * 1024;

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, for N or d
// below 1, a tile size below 1, or a problem too big to print (N or d above 4096, or a
// trace above kMaxTraceBytes).
void check_setup(const TraceSetup& setup);

// The trace of the FlashAttention-2 forward pass on random_inputs(setup), in fp32.
TileTrace trace_random(const TraceSetup& setup);

// The course's worked example: one query, four keys whose exponentiated scores are
// 1, 2, 4, 8, values V = 1, 2, 3, 4, KV tiles of two keys; in fp64, so O = 49/15 to the
// last digit. kv_tile = 4 gives the one-tile run for comparison.
TileTrace trace_worked_example(Index kv_tile = 2);

// Every tile and query-tile event as one JSON object per line (the --json format):
//   {"event":"setup",...} (with "numbering": kNumbering), then per query tile
//   {"event":"query_tile_start",...},
//   {"event":"kv_tile",...} per KV tile, {"event":"query_tile_end",...}.
// Non-finite numbers are written as the strings "-inf", "inf" and "nan".
std::vector<nlohmann::json> to_json_events(const TileTrace& trace);

}  // namespace flashlab::app

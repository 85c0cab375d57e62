// Printing a TileTrace as the `flashlab trace` command and the lessons show it: per query
// tile, one table line per (KV tile, query row) with the tile's row max, alpha and the
// state (m, l, U) afterwards, then the normalised output O = U / l and L = m + log l.
#pragma once

#include "kit/terminal.hpp"
#include "traces/tile_trace.hpp"

#include <iosfwd>

namespace flashlab::app {

struct TracePrintOptions {
  std::size_t max_rows = 8;  // a tile with more query rows shows its first 3 and last 2
  std::size_t keep_cols = 3;  // U and O rows wider than 2 * keep_cols show their ends
  Index only_query_tile = -1;  // >= 0: print that query tile alone
  int digits = 6;              // significant digits of O and L
};

void print_query_tile(std::ostream& out, const Style& style, const TileTrace& trace, Index i,
                      const TracePrintOptions& options = {});

// The whole trace: a header with the setup, every query tile, and the totals.
void print_trace(std::ostream& out, const Style& style, const TileTrace& trace,
                 const TracePrintOptions& options = {});

// The closing lines: tiles computed / partial / skipped and the HBM bytes, with their source.
void print_trace_totals(std::ostream& out, const Style& style, const TileTrace& trace);

}  // namespace flashlab::app

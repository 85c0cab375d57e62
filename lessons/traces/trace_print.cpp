#include "traces/trace_print.hpp"

#include <fmt/core.h>

#include <cmath>
#include <ostream>

namespace flashlab::app {

namespace {

constexpr std::size_t kHeadRows = 3, kTailRows = 2;  // shown of a tile with many rows

// The query rows to show of a tile with `rows` rows; -1 marks the "..." line.
std::vector<Index> shown_rows(Index rows, std::size_t max_rows) {
  std::vector<Index> out;
  if (static_cast<std::size_t>(rows) <= max_rows) {
    for (Index r = 0; r < rows; ++r) out.push_back(r);
    return out;
  }
  for (Index r = 0; r < Index(kHeadRows); ++r) out.push_back(r);
  out.push_back(-1);
  for (Index r = rows - Index(kTailRows); r < rows; ++r) out.push_back(r);
  return out;
}

std::vector<double> row_of(const cpu::Matrix<double>& X, Index r) {
  const auto row = X.row(r);  // one block object: its begin() and end() must match
  return std::vector<double>(row.begin(), row.end());
}

void add_tile_rows(Table& table, const TileRecord& t, const TracePrintOptions& o) {
  const std::string kind(cpu::to_string(t.kind));
  const std::string bytes = fmt::format("{}", t.read);
  if (t.kind == cpu::TileKind::skipped) {
    table.add({fmt::format("{}", t.j), index_range(t.k0, t.cols), kind, "all",
               "(in the future: not computed)", "", "", "", "", bytes});
    return;
  }
  bool first = true;
  for (Index r : shown_rows(t.rows, o.max_rows)) {
    const std::string head = first ? fmt::format("{}", t.j) : "";
    const std::string keys = first ? index_range(t.k0, t.cols) : "";
    const std::string what = first ? kind : "";
    const std::string read = first ? bytes : "";
    first = false;
    if (r < 0) {
      table.add({head, keys, what, "...", "", "", "", "", "", read});
      continue;
    }
    const bool masked = std::isinf(t.tile_max[r]);  // the row skipped this tile's update
    table.add({head, keys, what, fmt::format("{}", t.q0 + r), num(t.tile_max[r]),
               masked ? "(row masked)" : num(t.alpha[r]), num(t.m[r]), num(t.l[r]),
               num_row(row_of(t.U, r), 4, o.keep_cols), read});
  }
}

}  // namespace

void print_query_tile(std::ostream& out, const Style& style, const TileTrace& trace, Index i,
                      const TracePrintOptions& o) {
  const QueryTileRecord& q = trace.query_tiles.at(static_cast<std::size_t>(i));
  out << paint(style, Tone::heading,
               fmt::format("Query tile i = {}: query rows {}", i, index_range(q.q0, q.rows)))
      << fmt::format("   (load Q_{}: {} B)\n", i, q.read);
  Table table({"KV tile j", "keys", "kind", "row", "rowmax(S)", "alpha", "m", "l", "U row",
               "HBM read B"},
              {true, true, true});
  for (const TileRecord* t : trace.tiles_of(i)) add_tile_rows(table, *t, o);
  table.print(out, style);
  Table result({"row", "O = U / l", "L = m + log l"}, {true, true});
  for (Index r : shown_rows(q.rows, o.max_rows)) {
    if (r < 0) {
      result.add({"...", "", ""});
      continue;
    }
    result.add({fmt::format("{}", q.q0 + r), num_row(row_of(q.O, r), o.digits, o.keep_cols),
                num(q.L[r], o.digits)});
  }
  out << fmt::format("  after the sweep (store O_{} and L_{}: {} B):\n", i, i, q.written);
  result.print(out, style, 4);
  out << '\n';
}

void print_trace_totals(std::ostream& out, const Style& style, const TileTrace& t) {
  out << paint(style, Tone::emphasis, "Totals of the whole run") << '\n';
  out << fmt::format("  score tiles: {} computed ({} of them partial, masked in place), {} skipped\n",
                     t.counts.computed, t.counts.partial, t.counts.skipped);
  out << fmt::format("  HBM bytes: {} read, {} written\n", t.total_read(), t.total_written());
  out << fmt::format("  bytes {}\n", t.bytes_source);
}

void print_trace(std::ostream& out, const Style& style, const TileTrace& t,
                 const TracePrintOptions& o) {
  const Index Tr = static_cast<Index>(t.query_tiles.size());
  out << fmt::format("FlashAttention-2 forward, {}: N_q = {}, N_k = {}, d = {}, Br = {}, Bc = {}, "
                     "causal = {}, Tr = {} query tiles\n",
                     t.dtype, t.N_q, t.N_k, t.d, t.tile_sizes.Br, t.tile_sizes.Bc, cpu::to_string(t.causal), Tr);
  out << fmt::format("Numbering: {}.\n", kNumbering);
  out << "Each line: the state of one query row after the KV tile was merged in.\n"
         "alpha = exp(m_old - m_new) is the factor the old l and U were multiplied by.\n\n";
  for (Index i = 0; i < Tr; ++i)
    if (o.only_query_tile < 0 || o.only_query_tile == i) print_query_tile(out, style, t, i, o);
  print_trace_totals(out, style, t);
}

}  // namespace flashlab::app

#include "flashlab/sim/table.hpp"

#include "flashlab/sim/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <vector>

namespace flashlab::sim {

namespace {

using Row = std::vector<std::string>;

// Pads every column to its widest cell: the first left-aligned, the rest right-aligned.
std::string aligned(const std::vector<Row>& rows, std::string_view indent) {
  std::vector<std::size_t> width;
  for (const Row& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const Row& row : rows) {
    out += indent;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c > 0) out += "  ";
      out += c == 0 ? fmt::format("{:<{}}", row[c], width[c])
                    : fmt::format("{:>{}}", row[c], width[c]);
    }
    out += '\n';
  }
  return out;
}

// 3.44e10 -> "34.4 G"; below 1000, the number itself.
std::string si(double x) {
  constexpr std::array<std::string_view, 6> kPrefix = {"", "k", "M", "G", "T", "P"};
  constexpr double kStep = 1000.0;
  std::size_t k = 0;
  while (std::abs(x) >= kStep && k + 1 < kPrefix.size()) {
    x /= kStep;
    ++k;
  }
  return k == 0 ? fmt::format("{:.0f}", x) : fmt::format("{:.1f} {}", x, kPrefix[k]);
}

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string header(const Report& r, const HardwareProfile* profile) {
  const Problem& p = r.problem;
  std::string out = fmt::format(
      "N = {}, d = {}, {}, {}, SRAM {} (M = {} elements)", p.N, p.d, to_string(p.dtype),
      p.causal == cpu::Causal::none ? "non-causal" : "causal",
      format_bytes(static_cast<double>(p.sram_bytes)), p.M());
  if (p.l2_bytes > 0) out += fmt::format(", L2 {}", format_bytes(static_cast<double>(p.l2_bytes)));
  if (profile) out += fmt::format(", profile {}", profile->name);
  return out + "\n\n";
}

std::string summary(std::span<const Report> reports, const HardwareProfile* profile) {
  std::vector<Row> rows{{"program", "Br x Bc", "tiles", "skipped", "HBM read", "HBM written",
                         "HBM total", "matrix FLOPs", "other ops", "peak SRAM"}};
  const bool l2 = reports.front().problem.l2_bytes > 0;
  if (l2) rows[0].push_back("HBM past L2");
  if (profile) {
    rows[0].push_back("bound");
    rows[0].push_back("binds");
  }
  for (const Report& r : reports) {
    Row row{std::string(to_string(r.algorithm)),
            r.tiles ? fmt::format("{} x {}", r.tiles->tiles.Br, r.tiles->tiles.Bc) : "-",
            r.tiles ? std::to_string(r.tile_counts.computed) : "-",
            r.tiles ? std::to_string(r.tile_counts.skipped) : "-",
            format_bytes(double(r.bytes_read())), format_bytes(double(r.bytes_written())),
            format_bytes(double(r.bytes_total())), si(double(r.ops.matrix_flops)),
            si(double(r.ops.non_matrix())),
            r.tiles ? format_bytes(double(r.peak_sram)) : "-"};
    if (l2) row.push_back(format_bytes(double(r.dram_total())));
    if (profile) {
      const Bound b = roofline(r, *profile);
      row.push_back(seconds(b.seconds()));
      row.push_back(std::string(b.binding()));
    }
    rows.push_back(std::move(row));
  }
  return aligned(rows, "");
}

std::string per_tensor(std::span<const Report> reports) {
  std::vector<std::string> names;  // every program's tensors, in order of first appearance
  for (const Report& r : reports)
    for (const auto& t : r.tensors)
      if (std::find(names.begin(), names.end(), t.name) == names.end()) names.push_back(t.name);
  std::vector<Row> rows{{"tensor"}};
  for (const Report& r : reports) rows[0].push_back(fmt::format("{} read / written", to_string(r.algorithm)));
  for (const auto& name : names) {
    Row row{name};
    for (const Report& r : reports) {
      const auto t = std::find_if(r.tensors.begin(), r.tensors.end(),
                                  [&](const TensorTraffic& x) { return x.name == name; });
      row.push_back(t == r.tensors.end() ? "-"
                                         : fmt::format("{} / {}", format_bytes(double(t->read)),
                                                       format_bytes(double(t->written))));
    }
    rows.push_back(std::move(row));
  }
  return aligned(rows, "");
}

}  // namespace

std::string format_table(std::span<const Report> reports, const HardwareProfile* profile) {
  if (reports.empty()) return "";
  return header(reports.front(), profile) + summary(reports, profile) +
         "\nHBM traffic per tensor\n" + per_tensor(reports);
}

}  // namespace flashlab::sim

#include "book/measured_results.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace flashlab::app::book {

namespace {

using Row = std::map<std::string, std::string>;

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// Each data line of a CSV file as header -> cell; every line must have the header's width.
std::vector<Row> read_csv(const std::filesystem::path& path, std::string_view name) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line))
    throw cpu::InvalidArgument(fmt::format("{} is empty: it needs a header line", name));
  const auto header = split_commas(line);
  std::vector<Row> rows;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const auto cells = split_commas(line);
    if (cells.size() != header.size())
      throw cpu::InvalidArgument(fmt::format("{} line {}: {} cells where the header has {}", name,
                                             number, cells.size(), header.size()));
    Row row;
    for (std::size_t c = 0; c < header.size(); ++c) row[header[c]] = cells[c];
    rows.push_back(std::move(row));
  }
  return rows;
}

double number(const Row& row, const std::string& column, std::string_view file) {
  const auto it = row.find(column);
  if (it == row.end())
    throw cpu::InvalidArgument(fmt::format("{} has no column `{}`", file, column));
  try {
    std::size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw cpu::InvalidArgument(
      fmt::format("{}: `{}` in column `{}` is not a number", file, it->second, column));
}

std::string text(const Row& row, const std::string& column, std::string_view file) {
  const auto it = row.find(column);
  if (it == row.end())
    throw cpu::InvalidArgument(fmt::format("{} has no column `{}`", file, column));
  return it->second;
}

MeasuredPoint point(const Row& row, std::string_view file, const std::string& kernel_column,
                    const std::string& value_column) {
  return {.kernel = text(row, kernel_column, file),
          .N = cpu::Index(number(row, "N", file)),
          .d = cpu::Index(number(row, "d", file)),
          .heads = row.count("heads") ? cpu::Index(number(row, "heads", file)) : 1,
          .causal = number(row, "causal", file) != 0,
          .value = number(row, value_column, file)};
}

}  // namespace

MeasuredResults read_measured_results(const std::filesystem::path& root) {
  MeasuredResults out;
  if (const auto path = root / kMeasuredBytesFile; std::filesystem::is_regular_file(path)) {
    out.bytes_file = kMeasuredBytesFile;
    for (const Row& row : read_csv(path, kMeasuredBytesFile))
      out.sm_read.push_back(point(row, kMeasuredBytesFile, "kernel", "sm_read_measured"));
  }
  if (const auto path = root / kMeasuredSpeedFile; std::filesystem::is_regular_file(path)) {
    out.speed_file = kMeasuredSpeedFile;
    for (const Row& row : read_csv(path, kMeasuredSpeedFile))
      if (!text(row, "tflops", kMeasuredSpeedFile).empty())
        out.tflops.push_back(point(row, kMeasuredSpeedFile, "impl", "tflops"));
  }
  return out;
}

std::vector<MeasuredPoint> select(const std::vector<MeasuredPoint>& points, std::string_view kernel,
                                  cpu::Index d, bool causal) {
  std::vector<MeasuredPoint> out;
  for (const auto& p : points)
    if (p.kernel == kernel && p.d == d && p.causal == causal) out.push_back(p);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.N < b.N; });
  return out;
}

}  // namespace flashlab::app::book

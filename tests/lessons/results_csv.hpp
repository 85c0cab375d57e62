// The CSVs that bench/results/ keeps of measured runs, read as the tests compare them with
// the models: one map of column name to cell a row.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace flashlab::test {

// The rows of a CSV of bench/results/ as column -> cell.
inline std::vector<std::map<std::string, std::string>> results_csv(const std::string& name) {
  const auto path = std::filesystem::path(FLASHLAB_RESULTS_DIR) / name;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, path.string());
  const auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) out.push_back(c);
    if (!line.empty() && line.back() == ',') out.emplace_back();  // an empty last cell
    return out;
  };
  std::string line;
  std::getline(in, line);
  const auto header = cells(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto row = cells(line);
    REQUIRE(row.size() == header.size());
    std::map<std::string, std::string> r;
    for (std::size_t k = 0; k < row.size(); ++k) r[header[k]] = row[k];
    rows.push_back(r);
  }
  return rows;
}

}  // namespace flashlab::test

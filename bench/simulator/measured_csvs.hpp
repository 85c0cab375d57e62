// The CSVs of measured figures in a results folder (bench/results), for the programs that set
// the simulator's predictions beside them (grid_vs_measured, naive_vs_measured,
// fa3_dram_vs_measured), and their lines' fields.
#pragma once

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashlab::bench {

// The .csv files of `dir` whose name contains `only` (every one: empty), sorted by name; a
// missing folder is an error that says which and what to give.
inline std::vector<std::filesystem::path> measured_csvs(const std::filesystem::path& dir,
                                                        const std::string& only) {
  if (!std::filesystem::is_directory(dir))
    throw std::runtime_error("no folder " + dir.string() +
                             ": give --results the folder of measured CSVs (bench/results)");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".csv" &&
        e.path().filename().string().find(only) != std::string::npos)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A CSV line's fields: split at the commas outside double quotes, the quotes dropped.
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (const char c : line) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

}  // namespace flashlab::bench

// The CSVs of measured figures in a results folder (bench/results), for the programs that set
// the simulator's predictions beside them (grid_vs_measured, naive_vs_measured,
// fa3_dram_vs_measured, the block-log replays), their lines' fields, and their rows by column.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
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

// A CSV file read row by row after its header (the block logs, their bytes and step logs).
class CsvRows {
 public:
  explicit CsvRows(const std::filesystem::path& path) : path_(path), in_(path) {
    std::string line;
    std::getline(in_, line);
    header_ = csv_fields(line);
  }
  // The column `name`, or none where the header lacks it.
  std::optional<std::size_t> find(const std::string& name) const {
    const auto at = std::find(header_.begin(), header_.end(), name);
    if (at == header_.end()) return std::nullopt;
    return std::size_t(at - header_.begin());
  }
  // The column `name`, or an error that names the file.
  std::size_t column(const std::string& name) const {
    if (const auto at = find(name)) return *at;
    throw std::runtime_error(path_.string() + ": no column " + name);
  }
  // The next row with a field for every column; false at the end.
  bool next(std::vector<std::string>& fields) {
    for (std::string line; std::getline(in_, line);)
      if ((fields = csv_fields(line)).size() == header_.size()) return true;
    return false;
  }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  std::vector<std::string> header_;
};

}  // namespace flashlab::bench

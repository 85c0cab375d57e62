// The CSVs of measured figures in a results folder (bench/results), for the programs that set
// the simulator's predictions beside them (grid_vs_measured, naive_vs_measured).
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

}  // namespace flashlab::bench
